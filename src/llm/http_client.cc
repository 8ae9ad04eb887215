#include "llm/http_client.h"

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <cctype>
#include <charconv>
#include <memory>
#include <optional>
#include <utility>

#include "core/http_connection.h"
#include "core/tls_client.h"

namespace ci::llm {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;

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
HttpFailure Failed(const Url& url, const net::Failure& f, std::chrono::milliseconds timeout) {
  const std::string where = url.HostPort();
  if (f.timed_out) return {true, "no answer from " + where + " within " + Duration(timeout)};
  switch (f.step) {
    case net::Step::kTlsSetup:
      return {false, "TLS for " + where + ": OpenSSL refused the name '" + url.host + "'"};
    case net::Step::kResolve:
      return {false, "resolving " + where + ": " + f.ec.message()};
    case net::Step::kConnect:
      return {false, "connecting to " + where + ": " + f.ec.message()};
    case net::Step::kHandshake:
      if (!f.verify_error.empty()) {
        return {false,
                "TLS handshake with " + where + ": certificate verify failed: " + f.verify_error};
      }
      return {false, "TLS handshake with " + where + ": " + f.ec.message()};
    case net::Step::kSend:
      return {false, "sending to " + where + ": " + f.ec.message()};
    case net::Step::kRead:
      return {false, "reading from " + where + ": " + f.ec.message()};
    case net::Step::kTooLarge:
      return {false, "reading from " + where + ": the answer is larger than " +
                         std::to_string(kMaxReplyBody >> 20) + " MiB"};
  }
  return {false, where + ": " + f.ec.message()};
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
  const net::Clock::time_point deadline = net::Clock::now() + timeout;
  const http::request<http::string_body> req = MakeRequest(url, headers, json_body);
  net::Peer peer;
  peer.host = url.host;
  peer.port = url.port;
  if (url.tls()) {
    // Always verified against the system's trust store: a model server gets the conversation
    // and the API key.
    Result<std::shared_ptr<asio::ssl::context>> ctx = MakeTlsClientContext(TlsClientSettings{});
    if (!ctx.ok()) {
      co_return HttpFailure{false, "TLS for " + url.HostPort() + ": " + ctx.status().message()};
    }
    peer.tls = std::move(ctx).value();
  }
  auto opened = co_await net::Connection::Open(ex, peer, deadline);
  if (auto* f = std::get_if<net::Failure>(&opened)) co_return Failed(url, *f, timeout);
  net::Connection& connection = std::get<net::Connection>(opened);
  auto exchanged = co_await connection.Exchange(req, kMaxReplyBody);
  connection.Close();
  if (auto* f = std::get_if<net::Failure>(&exchanged)) co_return Failed(url, *f, timeout);
  net::Reply& reply = std::get<net::Reply>(exchanged);
  co_return HttpReply{static_cast<int>(reply.result_int()), std::move(reply.body())};
}

}  // namespace ci::llm
