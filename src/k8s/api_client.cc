#include "k8s/api_client.h"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <cstdint>
#include <limits>
#include <utility>

#include "core/json.h"
#include "core/tls_client.h"
#include "core/tls_peer.h"
#include "k8s/exec_protocol.h"

namespace ci::k8s {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
namespace websocket = beast::websocket;
using asio::use_awaitable;
using boost::system::error_code;
using TlsStream = ssl::stream<beast::tcp_stream>;

constexpr size_t kMaxBody = 64 << 20;  // a pod list is large; nothing we read is larger

std::string Where(const KubeConfig& c) { return "kubernetes API " + c.server.Url(); }

// The client certificate when given; the server checked against the CA (or the system's trust
// store) unless insecure-skip-tls-verify (core/tls_client.h).
Result<std::shared_ptr<ssl::context>> MakeTls(const KubeConfig& c) {
  const ApiServer& s = c.server;
  TlsClientSettings settings;
  settings.verify = !s.skip_verify;
  settings.ca_pem = s.ca_pem;
  settings.cert_pem = s.client_cert_pem;
  settings.key_pem = s.client_key_pem;
  Result<std::shared_ptr<ssl::context>> ctx = MakeTlsClientContext(settings);
  if (!ctx.ok()) return ctx.status().Context(Where(c));
  return ctx;
}

// SNI for a name (not an address); with verification the certificate must carry server_name as
// a DNS or an IP SAN.
Status SetPeerName(TlsStream& t, const KubeConfig& c) {
  const std::string& name = c.server.server_name.empty() ? c.server.host : c.server.server_name;
  if (!SetTlsPeer(t.native_handle(), name, !c.server.skip_verify)) {
    return Status::Error(Where(c) + ": cannot set up TLS for '" + name + "'");
  }
  return Status();
}

std::string HandshakeFailure(TlsStream& t, const KubeConfig& c, const error_code& ec) {
  if (ec == beast::error::timeout) return Where(c) + ": TLS handshake: no answer in time";
  long verify = ::SSL_get_verify_result(t.native_handle());
  if (!c.server.skip_verify && verify != X509_V_OK) {
    return Where(c) +
           ": the server's certificate did not verify: " + ::X509_verify_cert_error_string(verify) +
           " (from " + c.origin + ")";
  }
  return Where(c) + ": TLS handshake failed: " + ec.message();
}

asio::awaitable<Result<TlsStream>> Connect(asio::any_io_executor ex, const KubeConfig& c,
                                           ssl::context& tls, std::chrono::milliseconds timeout) {
  error_code ec;
  asio::ip::tcp::resolver resolver(ex);
  const std::string port = std::to_string(c.server.port);
  auto results =
      co_await resolver.async_resolve(c.server.host, port, asio::redirect_error(use_awaitable, ec));
  if (ec) co_return Status::Error(Where(c) + ": resolve: " + ec.message());
  beast::tcp_stream s(ex);
  s.expires_after(timeout);  // also bounds the TLS handshake
  co_await s.async_connect(results, asio::redirect_error(use_awaitable, ec));
  if (ec) co_return Status::Error(Where(c) + ": connect: " + ec.message());
  TlsStream t(std::move(s), tls);
  if (Status named = SetPeerName(t, c); !named.ok()) co_return named;
  co_await t.async_handshake(ssl::stream_base::client, asio::redirect_error(use_awaitable, ec));
  if (ec) co_return Status::Error(HandshakeFailure(t, c, ec));
  co_return std::move(t);
}

struct Opened {
  TlsStream stream;
  std::string authorization;  // the header's value for this call ("" for none)
};

// A verified TLS connection and the credentials of the moment (a token file read again when it
// rotated). The TLS context is made once per client; a failure is retried by the next call.
asio::awaitable<Result<Opened>> Open(asio::any_io_executor ex, const KubeConfig& c,
                                     std::shared_ptr<ssl::context>& tls,
                                     std::chrono::milliseconds timeout) {
  if (!tls) {
    auto made = MakeTls(c);
    if (!made.ok()) co_return made.status();
    tls = *made;
  }
  Result<std::string> authorization = c.credentials.Authorization();
  if (!authorization.ok()) co_return authorization.status();
  auto connected = co_await Connect(ex, c, *tls, timeout);
  if (!connected.ok()) co_return connected.status();
  co_return Opened{std::move(connected).value(), std::move(authorization).value()};
}

class WebSocketExec final : public ExecConnection {
 public:
  WebSocketExec(websocket::stream<TlsStream> ws, std::string protocol)
      : ws_(std::move(ws)), protocol_(std::move(protocol)) {
    beast::get_lowest_layer(ws_).expires_never();
    ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
    ws_.binary(true);
  }

  std::string_view protocol() const override { return protocol_; }

  asio::awaitable<Result<std::optional<std::string>>> Read() override {
    error_code ec;
    beast::flat_buffer buf;
    co_await ws_.async_read(buf, asio::redirect_error(use_awaitable, ec));
    // The server ends with a close frame (Beast answers it and tears the connection down). Once
    // it came, how the TLS session then ends (truncated, or data after close_notify as some
    // servers send) is no error of the exec.
    const bool close_frame_seen = ws_.reason().code != websocket::close_code::none;
    if (ec == websocket::error::closed || close_frame_seen || ec == ssl::error::stream_truncated ||
        ec == asio::error::eof) {
      co_return std::optional<std::string>();
    }
    if (ec) co_return Status::Error("reading the exec stream: " + ec.message());
    co_return std::optional<std::string>(beast::buffers_to_string(buf.data()));
  }

  asio::awaitable<Status> Write(std::string_view message) override {
    error_code ec;
    co_await ws_.async_write(asio::buffer(message.data(), message.size()),
                             asio::redirect_error(use_awaitable, ec));
    if (ec) co_return Status::Error("writing to the exec stream: " + ec.message());
    co_return Status();
  }

  void Close() override {
    error_code ignored;
    beast::get_lowest_layer(ws_).socket().shutdown(asio::socket_base::shutdown_both, ignored);
    beast::get_lowest_layer(ws_).close();
  }

 private:
  websocket::stream<TlsStream> ws_;
  std::string protocol_;
};

http::request<http::string_body> MakeRequest(const KubeConfig& c, std::string_view method,
                                             std::string_view path,
                                             const std::string& authorization,
                                             std::string_view json_body) {
  http::request<http::string_body> req(http::string_to_verb(method),
                                       c.server.base_path + std::string(path), 11);
  req.set(http::field::host, c.server.HostPort());
  req.set(http::field::user_agent, "code-interpreter/" CI_VERSION);
  req.set(http::field::accept, "application/json");
  if (!authorization.empty()) req.set(http::field::authorization, authorization);
  if (!json_body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = std::string(json_body);
  }
  req.prepare_payload();
  return req;
}

// A response body read as it arrives (buffer_body: the parser fills our buffer with whatever the
// socket gave, chunk framing removed), split into lines.
class HttpLineStream final : public LineStream {
 public:
  using Parser = http::response_parser<http::buffer_body>;
  HttpLineStream(TlsStream s, beast::flat_buffer buf, std::unique_ptr<Parser> parser,
                 std::chrono::milliseconds read_timeout, std::string what)
      : s_(std::move(s)),
        buf_(std::move(buf)),
        parser_(std::move(parser)),
        read_timeout_(read_timeout),
        what_(std::move(what)) {}

  asio::awaitable<Result<std::optional<std::string>>> Next() override {
    for (;;) {
      const size_t nl = pending_.find('\n');
      if (nl != std::string::npos) {
        std::string line = pending_.substr(0, nl);
        pending_.erase(0, nl + 1);
        if (line.empty() || line == "\r") continue;
        co_return std::optional<std::string>(std::move(line));
      }
      if (parser_->is_done()) {
        if (pending_.empty()) co_return std::optional<std::string>();
        co_return std::optional<std::string>(std::exchange(pending_, std::string()));
      }
      if (pending_.size() > kMaxLine) co_return Status::Error(what_ + ": a line over 16 MiB");
      Status read = co_await ReadSome();
      if (!read.ok()) co_return read;
    }
  }

  // Appends what the next read gives to pending_ (possibly nothing: a chunk header only).
  asio::awaitable<Status> ReadSome() {
    parser_->get().body().data = chunk_.data();
    parser_->get().body().size = chunk_.size();
    beast::get_lowest_layer(s_).expires_after(read_timeout_);
    error_code ec;
    co_await http::async_read_some(s_, buf_, *parser_, asio::redirect_error(use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};  // our buffer is full: take it, read on
    if (ec == beast::error::timeout) {
      co_return Status::Error(what_ + ": no data within " + std::to_string(read_timeout_.count()) +
                              " ms");
    }
    if (ec) co_return Status::Error(what_ + ": reading: " + ec.message());
    pending_.append(chunk_.data(), chunk_.size() - parser_->get().body().size);
    co_return Status();
  }

  // The rest of the body (a refusal's Status), at most `limit` bytes.
  asio::awaitable<Result<std::string>> ReadAll(size_t limit) {
    while (!parser_->is_done() && pending_.size() <= limit) {
      Status s = co_await ReadSome();
      if (!s.ok()) co_return s;
    }
    co_return std::exchange(pending_, std::string());
  }

  void Close() override {
    error_code ignored;
    beast::get_lowest_layer(s_).socket().shutdown(asio::socket_base::shutdown_both, ignored);
    beast::get_lowest_layer(s_).close();
  }

 private:
  static constexpr size_t kMaxLine = 16 << 20;
  TlsStream s_;
  beast::flat_buffer buf_;
  std::unique_ptr<Parser> parser_;
  std::chrono::milliseconds read_timeout_;
  std::string what_;
  std::array<char, 16384> chunk_{};
  std::string pending_;
};

}  // namespace

Status ApiError(std::string_view what, const ApiResponse& r) {
  std::string message, reason;
  rapidjson::Document d;
  std::string why;
  if (ParseJson(r.body, d, why) && d.IsObject()) {
    if (d.HasMember("message") && d["message"].IsString()) message = d["message"].GetString();
    if (d.HasMember("reason") && d["reason"].IsString()) reason = d["reason"].GetString();
  }
  if (message.empty()) message = r.body.substr(0, 512);
  std::string out(what);
  out.append(": ").append(message).append(" (HTTP ").append(std::to_string(r.status));
  if (!reason.empty()) out.append(", reason ").append(reason);
  out.append(")");
  return Status::Error(out);
}

ApiClient::ApiClient(asio::any_io_executor ex, KubeConfig config, std::chrono::milliseconds timeout)
    : ex_(std::move(ex)), config_(std::move(config)), timeout_(timeout) {}

ApiClient::~ApiClient() = default;

asio::awaitable<Result<ApiResponse>> ApiClient::Request(std::string_view method,
                                                        std::string_view path,
                                                        std::string_view json_body) {
  auto opened = co_await Open(ex_, config_, tls_, timeout_);
  if (!opened.ok()) co_return opened.status();
  TlsStream s = std::move(opened->stream);
  const std::string& authorization = opened->authorization;

  const std::string what = std::string(method) + " " + std::string(path);
  auto req = MakeRequest(config_, method, path, authorization, json_body);
  error_code ec;
  beast::get_lowest_layer(s).expires_after(timeout_);
  co_await http::async_write(s, req, asio::redirect_error(use_awaitable, ec));
  if (ec) co_return Status::Error(Where(config_) + ": " + what + ": sending: " + ec.message());
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxBody);
  co_await http::async_read(s, buf, parser, asio::redirect_error(use_awaitable, ec));
  if (ec == beast::error::timeout) {
    co_return Status::Error(Where(config_) + ": " + what + ": no answer within " +
                            std::to_string(timeout_.count()) + " ms");
  }
  if (ec) co_return Status::Error(Where(config_) + ": " + what + ": reading: " + ec.message());
  ApiResponse r;
  r.status = static_cast<int>(parser.get().result_int());
  r.body = std::move(parser.get().body());
  error_code ignored;
  beast::get_lowest_layer(s).socket().shutdown(asio::socket_base::shutdown_both, ignored);
  co_return r;
}

asio::awaitable<Result<std::unique_ptr<LineStream>>> ApiClient::Watch(
    std::string_view path, std::chrono::milliseconds read_timeout) {
  auto opened = co_await Open(ex_, config_, tls_, timeout_);
  if (!opened.ok()) co_return opened.status();
  TlsStream s = std::move(opened->stream);
  const std::string what = std::string("watch ").append(path);
  auto req = MakeRequest(config_, "GET", path, opened->authorization, "");
  error_code ec;
  beast::get_lowest_layer(s).expires_after(timeout_);
  co_await http::async_write(s, req, asio::redirect_error(use_awaitable, ec));
  if (ec) co_return Status::Error(Where(config_) + ": " + what + ": sending: " + ec.message());
  beast::flat_buffer buf;
  auto parser = std::make_unique<HttpLineStream::Parser>();
  parser->body_limit(std::numeric_limits<std::uint64_t>::max());  // a watch has no end size
  co_await http::async_read_header(s, buf, *parser, asio::redirect_error(use_awaitable, ec));
  if (ec == beast::error::timeout) {
    co_return Status::Error(Where(config_) + ": " + what + ": no answer within " +
                            std::to_string(timeout_.count()) + " ms");
  }
  if (ec) co_return Status::Error(Where(config_) + ": " + what + ": reading: " + ec.message());
  const int status = static_cast<int>(parser->get().result_int());
  auto stream = std::make_unique<HttpLineStream>(std::move(s), std::move(buf), std::move(parser),
                                                 read_timeout, Where(config_) + ": " + what);
  if (status < 200 || status >= 300) {
    auto body = co_await stream->ReadAll(1 << 20);
    stream->Close();
    co_return ApiError(what, ApiResponse{status, body.ok() ? body.value() : std::string()});
  }
  co_return std::unique_ptr<LineStream>(std::move(stream));
}

asio::awaitable<Result<std::unique_ptr<ExecConnection>>> ApiClient::Exec(std::string_view target) {
  auto opened = co_await Open(ex_, config_, tls_, timeout_);
  if (!opened.ok()) co_return opened.status();

  websocket::stream<TlsStream> ws(std::move(opened->stream));
  const std::string auth = opened->authorization;
  ws.set_option(websocket::stream_base::decorator([auth](websocket::request_type& req) {
    req.set(http::field::user_agent, "code-interpreter/" CI_VERSION);
    req.set(http::field::sec_websocket_protocol, kOfferedProtocols);
    if (!auth.empty()) req.set(http::field::authorization, auth);
  }));
  websocket::response_type res;
  error_code ec;
  const std::string host = config_.server.HostPort();
  const std::string path = config_.server.base_path + std::string(target);
  co_await ws.async_handshake(res, host, path, asio::redirect_error(use_awaitable, ec));
  if (ec == websocket::error::upgrade_declined) {
    const int code = static_cast<int>(res.result_int());
    Status refused = ApiError("exec", ApiResponse{code, res.body()});
    // No pod (404), or one whose containers have ended (the API has no reason for it, only the
    // kubelet's words in a 400): there is nothing to exec into any more.
    if (code == 404 ||
        (code == 400 && refused.message().find("completed pod") != std::string::npos)) {
      co_return Status::Gone(refused.message());
    }
    co_return refused;
  }
  if (ec) co_return Status::Error(Where(config_) + ": exec: " + ec.message());
  std::string protocol(res[http::field::sec_websocket_protocol]);
  if (protocol != kProtocolV5 && protocol != kProtocolV4) {
    co_return Status::Error(Where(config_) + ": exec: the server chose subprotocol '" + protocol +
                            "', not one of " + std::string(kOfferedProtocols));
  }
  co_return std::unique_ptr<ExecConnection>(
      std::make_unique<WebSocketExec>(std::move(ws), std::move(protocol)));
}

}  // namespace ci::k8s
