#include "docker/engine_client.h"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <limits>
#include <variant>

#include "core/json.h"
#include "core/tls_client.h"
#include "core/tls_peer.h"

namespace ci::docker {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using asio::use_awaitable;
using boost::system::error_code;
using UnixStream = beast::basic_stream<asio::local::stream_protocol>;
using TcpStream = beast::tcp_stream;
using TlsStream = ssl::stream<beast::tcp_stream>;
// Every call is one std::visit over these; the code below is written once for all three.
using AnyStream = std::variant<UnixStream, TcpStream, TlsStream>;

constexpr uint64_t kMaxBody = 64ull << 20;  // container lists and inspects stay far below

std::string Where(const Endpoint& ep) { return "docker at " + ep.Describe(); }

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// An error's text. TLS errors (the daemon refusing the session, a bad record) also name the
// endpoint and the client certificate offered, the usual cause being a missing or wrong one.
std::string Why(const Endpoint& ep, const error_code& ec) {
  std::string m = ec.message();
  if (ep.tls && (ec.category() == asio::error::get_ssl_category() ||
                 ec.category() == ssl::error::get_stream_category())) {
    std::string cert = ep.cert_path + "/cert.pem";
    m += " (TLS with " + ep.host + ":" + std::to_string(ep.port) + "; " +
         (Exists(cert) ? "client certificate " + cert
                       : "no client certificate was offered: " + cert + " does not exist") +
         ")";
  }
  return m;
}

// The TLS settings of DOCKER_TLS_VERIFY / DOCKER_TLS (wire-protocols.md B, core/tls_client.h):
// the client certificate cert.pem + key.pem when present (required with verification); with
// verification, the daemon's certificate checked against ca.pem (its host: SetPeerName).
Result<std::shared_ptr<ssl::context>> LoadTls(const Endpoint& ep) {
  std::string ca = ep.cert_path + "/ca.pem", cert = ep.cert_path + "/cert.pem",
              key = ep.cert_path + "/key.pem";
  bool has_cert = Exists(cert), has_key = Exists(key);
  if ((ep.tls_verify && !(has_cert && has_key)) || has_cert != has_key) {
    std::string missing = !has_cert && !has_key ? cert + " and " + key : has_cert ? key : cert;
    return Status::Error(Where(ep) + ": " + missing + (has_cert || has_key ? " is" : " are") +
                         " missing: the client certificate needs cert.pem and key.pem" +
                         (ep.tls_verify ? " (DOCKER_TLS_VERIFY is set)" : "") +
                         "; DOCKER_CERT_PATH names their directory");
  }
  if (ep.tls_verify && !Exists(ca)) {
    return Status::Error(Where(ep) + ": " + ca +
                         " is missing: it verifies the daemon's certificate (DOCKER_TLS_VERIFY "
                         "is set); DOCKER_CERT_PATH names its directory");
  }
  TlsClientSettings settings;
  settings.verify = ep.tls_verify;
  if (ep.tls_verify) settings.ca_file = ca;
  if (has_cert) {
    settings.cert_file = cert;
    settings.key_file = key;
  }
  Result<std::shared_ptr<ssl::context>> ctx = MakeTlsClientContext(settings);
  if (!ctx.ok()) return ctx.status().Context(Where(ep));
  return ctx;
}

// SNI for a host name (not for an address), and with verification the certificate must name the
// DOCKER_HOST host (DNS name or IP address SAN), as the docker CLI checks.
Status SetPeerName(TlsStream& t, const Endpoint& ep) {
  if (!SetTlsPeer(t.native_handle(), ep.host, ep.tls_verify)) {
    return Status::Error(Where(ep) + ": cannot set up TLS for host '" + ep.host + "'");
  }
  return Status();
}

std::string HandshakeFailure(TlsStream& t, const Endpoint& ep, const error_code& ec) {
  if (ec == beast::error::timeout) return Where(ep) + ": TLS handshake: no answer in time";
  long verify = ::SSL_get_verify_result(t.native_handle());
  if (ep.tls_verify && verify != X509_V_OK) {
    return Where(ep) +
           ": the daemon's certificate did not verify: " + ::X509_verify_cert_error_string(verify) +
           " (CA " + ep.cert_path + "/ca.pem, host " + ep.host + ")";
  }
  return Where(ep) + ": TLS handshake failed: " + Why(ep, ec);
}

// The Engine does not answer (stopped, restarting, not started yet): a request can be retried
// later, so the API answers 503 with Retry-After rather than 500.
Status Unreachable(std::string message) {
  return Status::Unavailable("docker engine unreachable", std::move(message));
}

asio::awaitable<Result<AnyStream>> Connect(asio::any_io_executor ex, const Endpoint& ep,
                                           std::shared_ptr<ssl::context>& tls,
                                           std::chrono::milliseconds timeout) {
  error_code ec;
  if (ep.kind == Endpoint::Kind::kUnix) {
    UnixStream s(ex);
    s.expires_after(timeout);
    asio::local::stream_protocol::endpoint target(ep.socket_path);
    co_await s.async_connect(target, asio::redirect_error(use_awaitable, ec));
    if (ec) co_return Unreachable(Where(ep) + ": connect: " + ec.message());
    co_return AnyStream(std::move(s));
  }
  if (ep.tls && !tls) {  // once per client; a failure is retried by the next call
    auto loaded = LoadTls(ep);
    if (!loaded.ok()) co_return loaded.status();
    tls = *loaded;
  }
  asio::ip::tcp::resolver resolver(ex);
  std::string port = std::to_string(ep.port);
  auto results =
      co_await resolver.async_resolve(ep.host, port, asio::redirect_error(use_awaitable, ec));
  if (ec) co_return Unreachable(Where(ep) + ": resolve: " + ec.message());
  TcpStream s(ex);
  s.expires_after(timeout);  // also bounds the TLS handshake
  co_await s.async_connect(results, asio::redirect_error(use_awaitable, ec));
  if (ec) co_return Unreachable(Where(ep) + ": connect: " + ec.message());
  if (!ep.tls) co_return AnyStream(std::move(s));
  TlsStream t(std::move(s), *tls);
  Status named = SetPeerName(t, ep);
  if (!named.ok()) co_return named;
  co_await t.async_handshake(ssl::stream_base::client, asio::redirect_error(use_awaitable, ec));
  if (ec) co_return Status::Error(HandshakeFailure(t, ep, ec));
  co_return AnyStream(std::move(t));
}

http::request<http::string_body> MakeRequest(http::verb verb, const std::string& target,
                                             std::string body) {
  http::request<http::string_body> req(verb, target, 11);
  req.set(http::field::host, "api.moby.localhost");
  req.set(http::field::user_agent, "code-interpreter/" CI_VERSION);
  if (!body.empty() || verb == http::verb::post) {
    req.set(http::field::content_type, "application/json");
    req.body() = std::move(body);
    req.prepare_payload();
  }
  return req;
}

// Writes the request; the deadline set here also bounds the answer's headers that follow.
template <typename Stream>
asio::awaitable<Status> Send(Stream& s, http::request<http::string_body>& req,
                             std::chrono::milliseconds timeout, const std::string& what,
                             const Endpoint& ep) {
  error_code ec;
  beast::get_lowest_layer(s).expires_after(timeout);
  co_await http::async_write(s, req, asio::redirect_error(use_awaitable, ec));
  if (ec) co_return Status::Error(what + ": sending: " + Why(ep, ec));
  co_return Status();
}

template <typename Stream>
asio::awaitable<Result<Response>> Exchange(Stream& s, http::request<http::string_body>& req,
                                           std::chrono::milliseconds timeout, std::string what,
                                           const Endpoint& ep) {
  if (Status sent = co_await Send(s, req, timeout, what, ep); !sent.ok()) co_return sent;
  error_code ec;
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxBody);
  if (req.method() == http::verb::head) parser.skip(true);
  co_await http::async_read(s, buf, parser, asio::redirect_error(use_awaitable, ec));
  if (ec) {
    if (ec == beast::error::timeout) {
      co_return Status::Error(what + ": no answer within " + std::to_string(timeout.count()) +
                              " ms");
    }
    co_return Status::Error(what + ": reading the answer: " + Why(ep, ec));
  }
  Response r;
  auto& msg = parser.get();
  r.status = static_cast<int>(msg.result_int());
  r.body = std::move(msg.body());
  if (auto it = msg.find("Api-Version"); it != msg.end()) r.api_version = std::string(it->value());
  error_code ignored;
  beast::get_lowest_layer(s).socket().shutdown(asio::socket_base::shutdown_both, ignored);
  co_return r;
}

template <typename Stream>
class HijackedStream final : public RawStream {
 public:
  HijackedStream(Stream s, beast::flat_buffer leftover)
      : s_(std::move(s)), leftover_(std::move(leftover)) {
    beast::get_lowest_layer(s_).expires_never();
  }

  asio::awaitable<size_t> ReadSome(asio::mutable_buffer buf, error_code& ec) override {
    ec = {};
    if (leftover_.size() > 0) {
      size_t n = asio::buffer_copy(buf, leftover_.data());
      leftover_.consume(n);
      co_return n;
    }
    size_t n = co_await s_.async_read_some(buf, asio::redirect_error(use_awaitable, ec));
    // A TLS peer closing without close_notify after the output is the end as well.
    if (ec == asio::error::eof || ec == ssl::error::stream_truncated) ec = {};
    co_return ec ? 0 : n;
  }

  asio::awaitable<Status> WriteAll(std::string_view data) override {
    error_code ec;
    co_await asio::async_write(s_, asio::buffer(data.data(), data.size()),
                               asio::redirect_error(use_awaitable, ec));
    if (ec) co_return Status::Error("writing to the exec stream: " + ec.message());
    co_return Status();
  }

  // On the socket under TLS too (see the header): TLS's own close_notify cannot be sent without
  // waiting for the peer's, which would end the output.
  void ShutdownSend() override {
    error_code ignored;
    beast::get_lowest_layer(s_).socket().shutdown(asio::socket_base::shutdown_send, ignored);
  }

  void Close() override {
    error_code ignored;
    auto& socket = beast::get_lowest_layer(s_).socket();
    socket.shutdown(asio::socket_base::shutdown_both, ignored);
    socket.close(ignored);
  }

 private:
  Stream s_;
  beast::flat_buffer leftover_;
};

template <typename Stream>
asio::awaitable<Result<std::unique_ptr<RawStream>>> Upgrade(Stream& s,
                                                            http::request<http::string_body>& req,
                                                            std::chrono::milliseconds timeout,
                                                            std::string what, const Endpoint& ep) {
  if (Status sent = co_await Send(s, req, timeout, what, ep); !sent.ok()) co_return sent;
  error_code ec;
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxBody);
  co_await http::async_read_header(s, buf, parser, asio::redirect_error(use_awaitable, ec));
  if (ec) co_return Status::Error(what + ": reading the answer: " + Why(ep, ec));
  int status = static_cast<int>(parser.get().result_int());
  if (status != 101 && status != 200) {
    // An error before the hijack is an ordinary response with a {"message"} body.
    co_await http::async_read(s, buf, parser, asio::redirect_error(use_awaitable, ec));
    Response r;
    r.status = status;
    r.body = parser.get().body();
    co_return HttpError(what, r);
  }
  std::unique_ptr<RawStream> raw =
      std::make_unique<HijackedStream<Stream>>(std::move(s), std::move(buf));
  co_return raw;
}

// Reads a streamed answer's body as it arrives and splits it into lines (StreamLines).
template <typename Stream, typename Request>
asio::awaitable<Result<Response>> ReadLines(Stream& s, Request& req, const LineSink& on_line,
                                            std::chrono::milliseconds total,
                                            std::chrono::milliseconds idle, std::string what) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + total;
  // Each wait is bounded by the idle timeout and by what is left of the total.
  auto arm = [&] {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    beast::get_lowest_layer(s).expires_after(
        std::max(std::chrono::milliseconds(1), std::min(left, idle)));
  };
  auto failed = [&](const char* doing, const error_code& ec) {
    if (ec == beast::error::timeout) {
      if (Clock::now() >= deadline) {
        return Status::Error(what + ": not finished within " + std::to_string(total.count()) +
                             " ms");
      }
      return Status::Error(what + ": nothing received for " + std::to_string(idle.count()) + " ms");
    }
    return Status::Error(what + ": " + doing + ": " + ec.message());
  };
  error_code ec;
  // Piece by piece, so a large body (an image's tar) is bounded by the idle timeout per write.
  http::request_serializer<typename Request::body_type> serializer(req);
  while (!serializer.is_done()) {
    arm();
    co_await http::async_write_some(s, serializer, asio::redirect_error(use_awaitable, ec));
    if (ec) co_return failed("sending", ec);
  }
  beast::flat_buffer buf;
  http::response_parser<http::buffer_body> parser;
  // Not boost::none: Boost 1.74 compares a Content-Length against it as "over the limit".
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  arm();
  co_await http::async_read_header(s, buf, parser, asio::redirect_error(use_awaitable, ec));
  if (ec) co_return failed("reading the answer", ec);
  Response r;
  r.status = static_cast<int>(parser.get().result_int());
  if (auto it = parser.get().find("Api-Version"); it != parser.get().end()) {
    r.api_version = std::string(it->value());
  }
  constexpr size_t kMaxErrorBody = 1 << 20;
  std::string chunk(64 << 10, '\0');
  std::string line;
  bool cut = false;  // the current line passed kMaxStreamLine: the rest of it is dropped
  bool stopped = false;
  while (!parser.is_done() && !stopped) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    parser.get().body().more = true;
    arm();
    co_await http::async_read_some(s, buf, parser, asio::redirect_error(use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return failed("reading the answer", ec);
    std::string_view got(chunk.data(), chunk.size() - parser.get().body().size);
    if (!r.ok()) {
      r.body.append(got.substr(0, kMaxErrorBody - std::min(kMaxErrorBody, r.body.size())));
      continue;
    }
    while (!got.empty() && !stopped) {
      size_t nl = got.find('\n');
      std::string_view piece = got.substr(0, nl);
      if (!cut) {
        size_t room = kMaxStreamLine - line.size();
        if (piece.size() > room) cut = true;
        line.append(piece.substr(0, room));
      }
      if (nl == std::string_view::npos) break;
      got.remove_prefix(nl + 1);
      stopped = !on_line(line);
      line.clear();
      cut = false;
    }
  }
  if (r.ok() && !stopped && !line.empty()) on_line(line);
  error_code ignored;
  beast::get_lowest_layer(s).socket().shutdown(asio::socket_base::shutdown_both, ignored);
  co_return r;
}

}  // namespace

Status HttpError(const std::string& what, const Response& r) {
  std::string message = r.body;
  rapidjson::Document doc;
  std::string why;
  if (ParseJson(r.body, doc, why) && doc.IsObject() && doc.HasMember("message") &&
      doc["message"].IsString()) {
    message = doc["message"].GetString();
  }
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) {
    message.pop_back();
  }
  if (message.size() > 500) message.resize(500);
  if (message.empty()) message = "(no message)";
  return Status::Error(what + ": " + message + " (HTTP " + std::to_string(r.status) + ")");
}

EngineClient::EngineClient(asio::any_io_executor ex, Endpoint endpoint,
                           std::chrono::milliseconds timeout)
    : ex_(std::move(ex)), endpoint_(std::move(endpoint)), timeout_(timeout) {}

asio::awaitable<Status> EngineClient::Negotiate() {
  std::string target = endpoint_.base_path + "/_ping";
  auto conn = co_await Connect(ex_, endpoint_, tls_, timeout_);
  if (!conn.ok()) co_return conn.status();
  auto req = MakeRequest(http::verb::get, target, {});
  std::string what = Where(endpoint_) + ": GET /_ping";
  Result<Response> r = Status::Error("unreachable");
  // One call for any transport; the awaitable is a named local (GCC 12, see CONTRIBUTING.md).
  auto op = std::visit(
      [&](auto& stream) { return Exchange(stream, req, timeout_, what, endpoint_); }, *conn);
  r = co_await std::move(op);
  if (!r.ok()) co_return r.status();
  if (!r->ok()) co_return HttpError(what, *r);
  if (!endpoint_.api_version.empty()) {
    api_version_ = endpoint_.api_version;  // DOCKER_API_VERSION: fixed, as the official client
    co_return Status();
  }
  int daemon = r->api_version.empty() ? kMaxApiVersion : ParseApiVersion(r->api_version);
  if (daemon < 0) {
    co_return Status::Error(what + ": unreadable Api-Version header '" + r->api_version + "'");
  }
  if (daemon < kMinApiVersion) {
    co_return Status::Error(Where(endpoint_) + " speaks API " + r->api_version +
                            "; code-interpreter needs 1.41 or newer (Docker Engine 20.10+)");
  }
  int use = std::min(daemon, kMaxApiVersion);
  api_version_ = std::to_string(use / 100) + "." + std::to_string(use % 100);
  co_return Status();
}

asio::awaitable<Result<Response>> EngineClient::Request(std::string_view method_view,
                                                        std::string_view path_view,
                                                        std::string_view body_view,
                                                        std::chrono::milliseconds timeout) {
  std::string method(method_view), path(path_view), json_body(body_view);
  if (timeout.count() <= 0) timeout = timeout_;
  std::string what = "docker " + method + " " + path.substr(0, path.find('?'));
  if (api_version_.empty()) co_return Status::Error(what + ": API version not negotiated");
  auto conn = co_await Connect(ex_, endpoint_, tls_, timeout);
  if (!conn.ok()) co_return conn.status();
  http::verb verb = http::string_to_verb(method);
  std::string target = endpoint_.base_path + "/v" + api_version_ + path;
  auto req = MakeRequest(verb, target, std::move(json_body));
  Result<Response> r = Status::Error("unreachable");
  auto op = std::visit(
      [&](auto& stream) { return Exchange(stream, req, timeout, what, endpoint_); }, *conn);
  r = co_await std::move(op);
  co_return r;
}

asio::awaitable<Result<Response>> EngineClient::StreamLines(std::string_view method_view,
                                                            std::string_view path_view,
                                                            const LineSink& on_line,
                                                            std::chrono::milliseconds total,
                                                            std::chrono::milliseconds idle) {
  std::string method(method_view), path(path_view);
  std::string what = "docker " + method + " " + path.substr(0, path.find('?'));
  if (api_version_.empty()) co_return Status::Error(what + ": API version not negotiated");
  auto conn = co_await Connect(ex_, endpoint_, tls_, std::min(timeout_, total));
  if (!conn.ok()) co_return conn.status();
  std::string target = endpoint_.base_path + "/v" + api_version_ + path;
  auto req = MakeRequest(http::string_to_verb(method), target, {});
  Result<Response> r = Status::Error("unreachable");
  auto op = std::visit(
      [&](auto& stream) { return ReadLines(stream, req, on_line, total, idle, what); }, *conn);
  r = co_await std::move(op);
  co_return r;
}

asio::awaitable<Result<Response>> EngineClient::UploadFile(
    std::string_view path_view, std::string_view file_view, std::string_view content_type_view,
    const LineSink& on_line, std::chrono::milliseconds total, std::chrono::milliseconds idle) {
  std::string path(path_view), file(file_view), content_type(content_type_view);
  std::string what = "docker POST " + path.substr(0, path.find('?'));
  if (api_version_.empty()) co_return Status::Error(what + ": API version not negotiated");
  http::request<http::file_body> req(http::verb::post,
                                     endpoint_.base_path + "/v" + api_version_ + path, 11);
  error_code ec;
  req.body().open(file.c_str(), beast::file_mode::scan, ec);
  if (ec) co_return Status::Error(what + ": opening " + file + ": " + ec.message());
  req.set(http::field::host, "api.moby.localhost");
  req.set(http::field::user_agent, "code-interpreter/" CI_VERSION);
  req.set(http::field::content_type, content_type);
  req.prepare_payload();
  auto conn = co_await Connect(ex_, endpoint_, tls_, std::min(timeout_, total));
  if (!conn.ok()) co_return conn.status();
  Result<Response> r = Status::Error("unreachable");
  auto op = std::visit(
      [&](auto& stream) { return ReadLines(stream, req, on_line, total, idle, what); }, *conn);
  r = co_await std::move(op);
  co_return r;
}

asio::awaitable<Result<std::unique_ptr<RawStream>>> EngineClient::Hijack(
    std::string_view path_view, std::string_view body_view) {
  std::string path(path_view), json_body(body_view);
  std::string what = "docker POST " + path.substr(0, path.find('?'));
  if (api_version_.empty()) co_return Status::Error(what + ": API version not negotiated");
  auto conn = co_await Connect(ex_, endpoint_, tls_, timeout_);
  if (!conn.ok()) co_return conn.status();
  std::string target = endpoint_.base_path + "/v" + api_version_ + path;
  auto req = MakeRequest(http::verb::post, target, std::move(json_body));
  req.set(http::field::connection, "Upgrade");
  req.set(http::field::upgrade, "tcp");
  Result<std::unique_ptr<RawStream>> r = Status::Error("unreachable");
  auto op = std::visit(
      [&](auto& stream) { return Upgrade(stream, req, timeout_, what, endpoint_); }, *conn);
  r = co_await std::move(op);
  co_return r;
}

}  // namespace ci::docker
