#include "docker/engine_client.h"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/http/field.hpp>
#include <functional>
#include <variant>

#include "core/http_connection.h"
#include "core/json.h"
#include "core/tls_client.h"

namespace ci::docker {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using boost::system::error_code;

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
// verification, the daemon's certificate checked against ca.pem (its host: Connect).
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

// The Engine does not answer (stopped, restarting, not started yet): a request can be retried
// later, so the API answers 503 with Retry-After rather than 500.
Status Unreachable(std::string message) {
  return Status::Unavailable("docker engine unreachable", std::move(message));
}

Status OpenFailure(const Endpoint& ep, const net::Failure& f) {
  switch (f.step) {
    case net::Step::kTlsSetup:
      return Status::Error(Where(ep) + ": cannot set up TLS for host '" + ep.host + "'");
    case net::Step::kResolve:
      return Unreachable(Where(ep) + ": resolve: " + f.ec.message());
    case net::Step::kHandshake:
      if (f.timed_out) return Status::Error(Where(ep) + ": TLS handshake: no answer in time");
      if (ep.tls_verify && !f.verify_error.empty()) {
        return Status::Error(Where(ep) +
                             ": the daemon's certificate did not verify: " + f.verify_error +
                             " (CA " + ep.cert_path + "/ca.pem, host " + ep.host + ")");
      }
      return Status::Error(Where(ep) + ": TLS handshake failed: " + Why(ep, f.ec));
    default:
      return Unreachable(Where(ep) + ": connect: " + f.ec.message());
  }
}

// A connection to the Engine, its deadline `timeout` from now; with TLS, the daemon's
// certificate must name the DOCKER_HOST host (DNS name or IP address SAN), as the docker CLI
// checks.
asio::awaitable<Result<net::Connection>> Connect(asio::any_io_executor ex, const Endpoint& ep,
                                                 std::shared_ptr<ssl::context>& tls,
                                                 std::chrono::milliseconds timeout) {
  net::Peer peer;
  if (ep.kind == Endpoint::Kind::kUnix) {
    peer.unix_path = ep.socket_path;
  } else {
    if (ep.tls && !tls) {  // once per client; a failure is retried by the next call
      auto loaded = LoadTls(ep);
      if (!loaded.ok()) co_return loaded.status();
      tls = *loaded;
    }
    peer.host = ep.host;
    peer.port = ep.port;
    if (ep.tls) peer.tls = tls;
    peer.verify = ep.tls_verify;
  }
  auto connected = co_await net::Connection::Open(ex, peer, net::Clock::now() + timeout);
  if (auto* f = std::get_if<net::Failure>(&connected)) co_return OpenFailure(ep, *f);
  co_return std::move(std::get<net::Connection>(connected));
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

// Writes the request and reads the whole answer, both within `timeout`.
asio::awaitable<Result<Response>> Exchange(net::Connection& c,
                                           const http::request<http::string_body>& req,
                                           std::chrono::milliseconds timeout,
                                           const std::string& what, const Endpoint& ep) {
  c.ExpiresAfter(timeout);
  auto exchanged = co_await c.Exchange(req, kMaxBody);
  c.Close();
  if (auto* f = std::get_if<net::Failure>(&exchanged)) {
    if (f->step == net::Step::kSend) co_return Status::Error(what + ": sending: " + Why(ep, f->ec));
    if (f->timed_out) {
      co_return Status::Error(what + ": no answer within " + std::to_string(timeout.count()) +
                              " ms");
    }
    co_return Status::Error(what + ": reading the answer: " + Why(ep, f->ec));
  }
  net::Reply& msg = std::get<net::Reply>(exchanged);
  Response r;
  r.status = static_cast<int>(msg.result_int());
  r.body = std::move(msg.body());
  if (auto it = msg.find("Api-Version"); it != msg.end()) r.api_version = std::string(it->value());
  co_return r;
}

// The raw stream of an exec start, over the connection the Engine hijacked.
class HijackedStream final : public RawStream {
 public:
  explicit HijackedStream(net::Connection c) : c_(std::move(c)) { c_.ExpiresNever(); }

  asio::awaitable<size_t> ReadSome(asio::mutable_buffer buf, error_code& ec) override {
    co_return co_await c_.ReadSome(buf, ec);
  }

  asio::awaitable<Status> WriteAll(std::string_view data) override {
    const error_code ec = co_await c_.WriteAll(data);
    if (ec) co_return Status::Error("writing to the exec stream: " + ec.message());
    co_return Status();
  }

  void ShutdownSend() override { c_.ShutdownSend(); }
  void Close() override { c_.Close(); }

 private:
  net::Connection c_;
};

// A streamed answer's body as it arrives, split into lines (StreamLines, UploadFile).
template <typename Request>
asio::awaitable<Result<Response>> ReadLines(net::Connection& c, Request& req,
                                            const LineSink& on_line,
                                            std::chrono::milliseconds total,
                                            std::chrono::milliseconds idle, std::string what) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + total;
  // Each wait is bounded by the idle timeout and by what is left of the total.
  const std::function<void()> arm = [&] {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    c.ExpiresAfter(std::max(std::chrono::milliseconds(1), std::min(left, idle)));
  };
  auto failed = [&](const char* doing, const net::Failure& f) {
    if (f.timed_out) {
      if (Clock::now() >= deadline) {
        return Status::Error(what + ": not finished within " + std::to_string(total.count()) +
                             " ms");
      }
      return Status::Error(what + ": nothing received for " + std::to_string(idle.count()) + " ms");
    }
    return Status::Error(what + ": " + doing + ": " + f.ec.message());
  };
  // The body piece by piece, so a large one (an image's tar) is bounded by the idle timeout per
  // write.
  if (auto f = co_await c.Start(req, arm)) {
    co_return failed(f->step == net::Step::kSend ? "sending" : "reading the answer", *f);
  }
  Response r;
  r.status = static_cast<int>(c.header().result_int());
  if (auto it = c.header().find("Api-Version"); it != c.header().end()) {
    r.api_version = std::string(it->value());
  }
  constexpr size_t kMaxErrorBody = 1 << 20;
  std::string line;
  bool cut = false;  // the current line passed kMaxStreamLine: the rest of it is dropped
  bool stopped = false;
  while (!c.body_done() && !stopped) {
    arm();
    auto read = co_await c.ReadBody();
    if (auto* f = std::get_if<net::Failure>(&read)) co_return failed("reading the answer", *f);
    std::string_view got = std::get<std::string_view>(read);
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
  c.Close();
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
  Result<Response> r = co_await Exchange(*conn, req, timeout_, what, endpoint_);
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
  co_return co_await Exchange(*conn, req, timeout, what, endpoint_);
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
  co_return co_await ReadLines(*conn, req, on_line, total, idle, what);
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
  co_return co_await ReadLines(*conn, req, on_line, total, idle, what);
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
  conn->ExpiresAfter(timeout_);
  if (auto f = co_await conn->Start(req)) {
    if (f->step == net::Step::kSend)
      co_return Status::Error(what + ": sending: " + Why(endpoint_, f->ec));
    co_return Status::Error(what + ": reading the answer: " + Why(endpoint_, f->ec));
  }
  const int status = static_cast<int>(conn->header().result_int());
  if (status != 101 && status != 200) {
    // An error before the hijack is an ordinary response with a {"message"} body.
    Response r{status, {}, {}};
    while (!conn->body_done() && r.body.size() < (1 << 20)) {
      auto read = co_await conn->ReadBody();
      if (std::holds_alternative<net::Failure>(read)) break;
      r.body.append(std::get<std::string_view>(read));
    }
    conn->Close();
    co_return HttpError(what, r);
  }
  co_return std::unique_ptr<RawStream>(std::make_unique<HijackedStream>(std::move(*conn)));
}

}  // namespace ci::docker
