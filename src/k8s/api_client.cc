#include "k8s/api_client.h"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <utility>

#include "core/http_connection.h"
#include "core/json.h"
#include "core/tls_client.h"
#include "k8s/exec_protocol.h"

namespace ci::k8s {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
namespace websocket = beast::websocket;
using asio::use_awaitable;
using boost::system::error_code;
using net::TlsStream;

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

// What a failed connection says: the server, the step, and for a refused certificate why and
// which kubeconfig trusted what.
Status OpenFailure(const KubeConfig& c, const net::Failure& f) {
  switch (f.step) {
    case net::Step::kTlsSetup: {
      const std::string& name = c.server.server_name.empty() ? c.server.host : c.server.server_name;
      return Status::Error(Where(c) + ": cannot set up TLS for '" + name + "'");
    }
    case net::Step::kResolve:
      return Status::Error(Where(c) + ": resolve: " + f.ec.message());
    case net::Step::kHandshake:
      if (f.timed_out) return Status::Error(Where(c) + ": TLS handshake: no answer in time");
      if (!c.server.skip_verify && !f.verify_error.empty()) {
        return Status::Error(Where(c) + ": the server's certificate did not verify: " +
                             f.verify_error + " (from " + c.origin + ")");
      }
      return Status::Error(Where(c) + ": TLS handshake failed: " + f.ec.message());
    default:
      return Status::Error(Where(c) + ": connect: " + f.ec.message());
  }
}

// What a failed call says once connected.
Status CallFailure(const KubeConfig& c, std::string_view what, const net::Failure& f,
                   std::chrono::milliseconds timeout) {
  const std::string prefix = Where(c) + ": " + std::string(what);
  if (f.step == net::Step::kSend) return Status::Error(prefix + ": sending: " + f.ec.message());
  if (f.timed_out) {
    return Status::Error(prefix + ": no answer within " + std::to_string(timeout.count()) + " ms");
  }
  return Status::Error(prefix + ": reading: " + f.ec.message());
}

struct Opened {
  net::Connection connection;
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
  net::Peer peer;
  peer.host = c.server.host;
  peer.port = c.server.port;
  peer.tls = tls;
  peer.tls_name = c.server.server_name;  // SNI for a name; verified as a DNS or an IP SAN
  peer.verify = !c.server.skip_verify;
  auto connected = co_await net::Connection::Open(ex, peer, net::Clock::now() + timeout);
  if (auto* f = std::get_if<net::Failure>(&connected)) co_return OpenFailure(c, *f);
  co_return Opened{std::move(std::get<net::Connection>(connected)),
                   std::move(authorization).value()};
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
    // A PATCH's body is a JSON merge patch (RFC 7386), what the API server takes for any kind.
    req.set(http::field::content_type,
            method == "PATCH" ? "application/merge-patch+json" : "application/json");
    req.body() = std::string(json_body);
  }
  req.prepare_payload();
  return req;
}

// A response body read as it arrives, split into lines.
class HttpLineStream final : public LineStream {
 public:
  HttpLineStream(net::Connection c, std::chrono::milliseconds read_timeout, std::string what)
      : c_(std::move(c)), read_timeout_(read_timeout), what_(std::move(what)) {}

  asio::awaitable<Result<std::optional<std::string>>> Next() override {
    for (;;) {
      const size_t nl = pending_.find('\n');
      if (nl != std::string::npos) {
        std::string line = pending_.substr(0, nl);
        pending_.erase(0, nl + 1);
        if (line.empty() || line == "\r") continue;
        co_return std::optional<std::string>(std::move(line));
      }
      if (c_.body_done()) {
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
    c_.ExpiresAfter(read_timeout_);
    auto got = co_await c_.ReadBody();
    if (auto* f = std::get_if<net::Failure>(&got)) {
      if (f->timed_out) {
        co_return Status::Error(what_ + ": no data within " +
                                std::to_string(read_timeout_.count()) + " ms");
      }
      co_return Status::Error(what_ + ": reading: " + f->ec.message());
    }
    pending_.append(std::get<std::string_view>(got));
    co_return Status();
  }

  // The rest of the body (a refusal's Status), at most `limit` bytes.
  asio::awaitable<Result<std::string>> ReadAll(size_t limit) {
    while (!c_.body_done() && pending_.size() <= limit) {
      Status s = co_await ReadSome();
      if (!s.ok()) co_return s;
    }
    co_return std::exchange(pending_, std::string());
  }

  void Close() override { c_.Close(); }

 private:
  static constexpr size_t kMaxLine = 16 << 20;
  net::Connection c_;
  std::chrono::milliseconds read_timeout_;
  std::string what_;
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
  net::Connection& c = opened->connection;
  const std::string what = std::string(method) + " " + std::string(path);
  auto req = MakeRequest(config_, method, path, opened->authorization, json_body);
  c.ExpiresAfter(timeout_);
  auto exchanged = co_await c.Exchange(req, kMaxBody);
  c.Close();
  if (auto* f = std::get_if<net::Failure>(&exchanged)) {
    co_return CallFailure(config_, what, *f, timeout_);
  }
  net::Reply& reply = std::get<net::Reply>(exchanged);
  co_return ApiResponse{static_cast<int>(reply.result_int()), std::move(reply.body())};
}

asio::awaitable<Result<std::unique_ptr<LineStream>>> ApiClient::Watch(
    std::string_view path, std::chrono::milliseconds read_timeout) {
  auto opened = co_await Open(ex_, config_, tls_, timeout_);
  if (!opened.ok()) co_return opened.status();
  net::Connection& c = opened->connection;
  const std::string what = std::string("watch ").append(path);
  auto req = MakeRequest(config_, "GET", path, opened->authorization, "");
  c.ExpiresAfter(timeout_);
  if (auto f = co_await c.Start(req)) co_return CallFailure(config_, what, *f, timeout_);
  const int status = static_cast<int>(c.header().result_int());
  auto stream =
      std::make_unique<HttpLineStream>(std::move(c), read_timeout, Where(config_) + ": " + what);
  if (status < 200 || status >= 300) {
    auto body = co_await stream->ReadAll(1 << 20);
    stream->Close();
    co_return ApiError(what, ApiResponse{status, body.ok() ? body.value() : std::string()});
  }
  co_return std::unique_ptr<LineStream>(std::move(stream));
}

asio::awaitable<Result<std::unique_ptr<ExecConnection>>> ApiClient::Exec(std::string_view target,
                                                                         int* declined) {
  auto opened = co_await Open(ex_, config_, tls_, timeout_);
  if (!opened.ok()) co_return opened.status();

  websocket::stream<TlsStream> ws(opened->connection.ReleaseTls());
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
    if (declined) *declined = code;
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
