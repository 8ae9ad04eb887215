#include "llm/http_client.h"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <algorithm>
#include <boost/asio/async_result.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <charconv>
#include <memory>
#include <optional>
#include <utility>

#include "core/tls_client.h"
#include "core/tls_peer.h"

namespace ci::llm {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using asio::use_awaitable;
using asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;
using TlsStream = ssl::stream<beast::tcp_stream>;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string Duration(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + " s";
  return std::to_string(d.count()) + " ms";
}

// What a step's failure says; past the deadline every failure is the timeout's doing (a closed
// socket shows up as whatever the step was doing when the timer closed it).
HttpFailure Failed(const Url& url, std::string_view step, const error_code& ec,
                   Clock::time_point deadline, std::chrono::milliseconds timeout) {
  if (ec == beast::error::timeout || Clock::now() >= deadline) {
    return {true, "no answer from " + url.HostPort() + " within " + Duration(timeout)};
  }
  return {false, std::string(step) + " " + url.HostPort() + ": " + ec.message()};
}

struct ResolveOutcome {
  error_code ec;
  tcp::resolver::results_type results;
};

// asio cannot interrupt getaddrinfo (a cancelled lookup still waits for it in the resolver's
// thread), so the lookup races a timer and is abandoned, not cancelled, when the timer wins.
asio::awaitable<ResolveOutcome> ResolveBefore(asio::any_io_executor ex, const Url& url,
                                              Clock::time_point deadline) {
  auto race = [ex, host = url.host, port = std::to_string(url.port), deadline](auto handler) {
    using Handler = decltype(handler);
    struct Race {
      Race(const asio::any_io_executor& ex, Handler h, Clock::time_point deadline)
          : resolver(ex), timer(ex, deadline), handler(std::move(h)) {}
      void Finish(ResolveOutcome outcome) {
        if (!handler) return;
        auto h = std::move(*handler);
        handler.reset();
        auto where = asio::get_associated_executor(h, resolver.get_executor());
        asio::post(where, [h = std::move(h), outcome = std::move(outcome)]() mutable {
          std::move(h)(std::move(outcome));
        });
      }
      tcp::resolver resolver;
      asio::steady_timer timer;
      std::optional<Handler> handler;
    };
    auto state = std::make_shared<Race>(ex, std::move(handler), deadline);
    state->resolver.async_resolve(host, port,
                                  [state](error_code ec, tcp::resolver::results_type results) {
                                    state->timer.cancel();
                                    state->Finish({ec, std::move(results)});
                                  });
    state->timer.async_wait([state](error_code ec) {
      if (!ec) state->Finish({beast::error::timeout, {}});
    });
  };
  co_return co_await asio::async_initiate<decltype(use_awaitable), void(ResolveOutcome)>(
      std::move(race), use_awaitable);
}

// A TCP connection to the URL's server, the stream's deadline set for everything that follows.
asio::awaitable<std::variant<beast::tcp_stream, HttpFailure>> ConnectTcp(
    asio::any_io_executor ex, const Url& url, Clock::time_point deadline,
    std::chrono::milliseconds timeout) {
  beast::tcp_stream stream(ex);
  stream.expires_at(deadline);
  error_code ec;
  const asio::ip::address address = asio::ip::make_address(url.host, ec);
  if (!ec) {
    const tcp::endpoint endpoint(address, url.port);
    co_await stream.async_connect(endpoint, asio::redirect_error(use_awaitable, ec));
  } else {
    ResolveOutcome resolved = co_await ResolveBefore(ex, url, deadline);
    if (resolved.ec) co_return Failed(url, "resolving", resolved.ec, deadline, timeout);
    co_await stream.async_connect(resolved.results, asio::redirect_error(use_awaitable, ec));
  }
  if (ec) co_return Failed(url, "connecting to", ec, deadline, timeout);
  co_return std::move(stream);
}

// The server's certificate always verified against the system's trust store (SSL_CERT_FILE /
// SSL_CERT_DIR when set): a model server gets the conversation and the API key.
std::variant<std::shared_ptr<ssl::context>, HttpFailure> MakeTlsContext(const Url& url) {
  Result<std::shared_ptr<ssl::context>> ctx = MakeTlsClientContext(TlsClientSettings{});
  if (!ctx.ok())
    return HttpFailure{false, "TLS for " + url.HostPort() + ": " + ctx.status().message()};
  return std::move(ctx).value();
}

std::string HandshakeFailure(TlsStream& t, const Url& url, const error_code& ec) {
  const long verify = ::SSL_get_verify_result(t.native_handle());
  if (verify != X509_V_OK) {
    return "TLS handshake with " + url.HostPort() +
           ": certificate verify failed: " + ::X509_verify_cert_error_string(verify);
  }
  return "TLS handshake with " + url.HostPort() + ": " + ec.message();
}

http::request<http::string_body> MakeRequest(const Url& url, const std::vector<HttpHeader>& headers,
                                             std::string_view json_body) {
  const std::string target = url.path.empty() ? "/" : url.path;
  http::request<http::string_body> req(http::verb::post, target, 11);
  // The port only when it is not the scheme's own, as curl and browsers send it (some proxies
  // route on the exact name).
  const bool default_port = url.port == (url.tls() ? 443 : 80);
  std::string host = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  if (!default_port) host += ":" + std::to_string(url.port);
  req.set(http::field::host, host);
  req.set(http::field::user_agent, "code-interpreter/" CI_VERSION);
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "application/json");
  for (const HttpHeader& h : headers) req.set(h.name, h.value);
  req.keep_alive(false);
  req.body() = std::string(json_body);
  req.prepare_payload();
  return req;
}

// Writes the request and reads the whole reply on a connected (and, for https, handshaken)
// stream whose deadline is already set.
template <typename Stream>
asio::awaitable<HttpResult> Exchange(Stream& stream, const Url& url,
                                     const http::request<http::string_body>& req,
                                     Clock::time_point deadline,
                                     std::chrono::milliseconds timeout) {
  error_code ec;
  co_await http::async_write(stream, req, asio::redirect_error(use_awaitable, ec));
  if (ec) co_return Failed(url, "sending to", ec, deadline, timeout);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxReplyBody);
  // The header first: Beast 1.74's async_read parses eagerly past a Content-Length over the
  // limit and loses the body_limit error (then reserves that many bytes), read_header does not.
  co_await http::async_read_header(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
  if (!ec) {
    co_await http::async_read(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
  }
  // A body that ends with the connection, from a server that closes TLS without close_notify:
  // the bytes are all there.
  if (ec == ssl::error::stream_truncated && parser.need_eof()) parser.put_eof(ec);
  if (ec == http::error::body_limit) {
    co_return HttpFailure{false, "reading from " + url.HostPort() + ": the answer is larger than " +
                                     std::to_string(kMaxReplyBody >> 20) + " MiB"};
  }
  if (ec) co_return Failed(url, "reading from", ec, deadline, timeout);
  co_return HttpReply{static_cast<int>(parser.get().result_int()), std::move(parser.get().body())};
}

void Close(beast::tcp_stream& s) {
  error_code ignored;
  s.socket().shutdown(asio::socket_base::shutdown_both, ignored);
  s.close();
}

}  // namespace

std::string Url::HostPort() const {
  const std::string name = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return name + ":" + std::to_string(port);
}

Result<Url> ParseUrl(std::string_view text) {
  const std::string quoted = "'" + std::string(text) + "'";
  for (unsigned char c : text) {
    if (c <= ' ' || c == 0x7f) {
      return Status::Error(quoted + " holds whitespace or a control character");
    }
  }
  Url url;
  const size_t scheme_end = text.find("://");
  if (scheme_end != std::string_view::npos) url.scheme = Lower(text.substr(0, scheme_end));
  if (url.scheme != "http" && url.scheme != "https") {
    return Status::Error(quoted + " does not start with http:// or https://");
  }
  std::string_view rest = text.substr(scheme_end + 3);
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return Status::Error(quoted + " has a query or a fragment");
  }
  const size_t path_start = rest.find('/');
  std::string_view authority = rest.substr(0, path_start);
  if (path_start != std::string_view::npos) url.path = std::string(rest.substr(path_start));
  if (authority.find('@') != std::string_view::npos) {
    return Status::Error(quoted + " has user info (put the key in LLM_API_KEY)");
  }
  std::optional<std::string_view> port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return Status::Error(quoted + " has no closing ']'");
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after.front() != ':') {
      return Status::Error(quoted + " has text after the ']'");
    }
    if (!after.empty()) port = after.substr(1);
    error_code ec;
    asio::ip::make_address_v6(url.host, ec);
    if (ec) return Status::Error(quoted + ": '" + url.host + "' is not an IPv6 address");
  } else {
    const size_t colon = authority.find(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (url.host.empty()) return Status::Error(quoted + " has no host");
  url.port = url.tls() ? 443 : 80;
  if (port) {
    unsigned value = 0;
    const char* end = port->data() + port->size();
    auto [stop, err] = std::from_chars(port->data(), end, value);
    if (port->empty() || err != std::errc() || stop != end || value == 0 || value > 65535) {
      return Status::Error(quoted + ": the port is not a number from 1 to 65535");
    }
    url.port = static_cast<uint16_t>(value);
  }
  return url;
}

asio::awaitable<HttpResult> PostJson(asio::any_io_executor ex, const Url& url,
                                     const std::vector<HttpHeader>& headers,
                                     std::string_view json_body,
                                     std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  const http::request<http::string_body> req = MakeRequest(url, headers, json_body);
  std::shared_ptr<ssl::context> tls;
  if (url.tls()) {
    auto made = MakeTlsContext(url);
    if (auto* failure = std::get_if<HttpFailure>(&made)) co_return std::move(*failure);
    tls = std::move(std::get<0>(made));
  }
  auto connected = co_await ConnectTcp(ex, url, deadline, timeout);
  if (auto* failure = std::get_if<HttpFailure>(&connected)) co_return std::move(*failure);
  beast::tcp_stream tcp_stream = std::move(std::get<beast::tcp_stream>(connected));
  if (!url.tls()) {
    HttpResult result = co_await Exchange(tcp_stream, url, req, deadline, timeout);
    Close(tcp_stream);
    co_return result;
  }
  TlsStream stream(std::move(tcp_stream), *tls);
  if (!SetTlsPeer(stream.native_handle(), url.host, /*verify=*/true)) {
    co_return HttpFailure{
        false, "TLS for " + url.HostPort() + ": OpenSSL refused the name '" + url.host + "'"};
  }
  error_code ec;
  co_await stream.async_handshake(ssl::stream_base::client,
                                  asio::redirect_error(use_awaitable, ec));
  if (ec == beast::error::timeout || (ec && Clock::now() >= deadline)) {
    co_return Failed(url, "TLS handshake with", ec, deadline, timeout);
  }
  if (ec) co_return HttpFailure{false, HandshakeFailure(stream, url, ec)};
  HttpResult result = co_await Exchange(stream, url, req, deadline, timeout);
  Close(beast::get_lowest_layer(stream));
  co_return result;
}

}  // namespace ci::llm
