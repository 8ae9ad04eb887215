#include "daemon/http/http_server.h"

#include <utility>
// clang-format off
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
// clang-format on
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <limits>
#include <optional>
#include <set>
#include <vector>

#include "core/short_id.h"
#include "daemon/http/request_id.h"

namespace ci::daemon {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using asio::use_awaitable;

constexpr size_t kHeaderLimit = 16 * 1024;
constexpr size_t kBodyChunk = 64 * 1024;
// Lingering close: how much of an unread request body is read and dropped, and for how long,
// before the connection closes (nginx: lingering_time 30 s).
constexpr uint64_t kLingerMaxBytes = uint64_t{1} << 30;
constexpr std::chrono::seconds kLingerTime{30};
// Out of descriptors (or kernel memory) at accept: the next try waits this long, or until a
// connection ends. The failure is logged at most once per kFailureLogInterval.
constexpr std::chrono::milliseconds kAcceptBackoff{100};
constexpr std::chrono::seconds kFailureLogInterval{10};

bool OutOfResources(const beast::error_code& ec) {
  return ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space ||
         ec == asio::error::no_memory ||
         ec == beast::error_code(ENFILE, asio::error::get_system_category());
}

}  // namespace

struct Connection;

struct HttpServer::State {
  State(asio::io_context& io, HttpServerOptions o, HttpHandler h)
      : io(io), options(std::move(o)), handler(std::move(h)), acceptor(io), room(io) {}
  asio::io_context& io;
  HttpServerOptions options;
  HttpHandler handler;
  tcp::acceptor acceptor;
  std::set<Connection*> connections;
  bool stopping = false;
  // Cancelled whenever a connection ends: wakes the accept loop waiting for room.
  asio::steady_timer room;
  std::chrono::steady_clock::time_point failure_logged{};
  uint64_t failures_unlogged = 0;

  asio::awaitable<void> WaitForRoom(std::chrono::milliseconds at_most) {
    beast::error_code ec;
    room.expires_after(at_most);
    co_await room.async_wait(asio::redirect_error(use_awaitable, ec));
  }
  bool CloseLongestIdle();
  void LogAcceptFailure(const beast::error_code& ec);
};

// One accepted connection; also the HttpExchange of the request it is serving.
struct Connection : HttpExchange {
  Connection(std::shared_ptr<HttpServer::State> s, tcp::socket socket)
      : state(std::move(s)), stream(std::move(socket)), watch_done(stream.get_executor()) {}

  std::shared_ptr<HttpServer::State> state;
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  std::optional<http::request_parser<http::buffer_body>> parser;
  HttpRequestHead request;
  bool idle = false;  // waiting for a request: may be closed at shutdown or for room
  std::chrono::steady_clock::time_point idle_since{};
  bool responded = false;  // a response (or stream) has started for the current request
  bool close_after = false;
  uint64_t body_read = 0;
  // client watch
  bool watching = false;
  // Set by UnwatchClient: a watcher that has not started waiting yet (co_spawn defers it) must
  // not start, since the socket cancel cannot reach a wait that does not exist yet.
  bool unwatched = false;
  asio::steady_timer watch_done;
  std::optional<http::response_serializer<http::empty_body>> stream_serializer;
  std::optional<http::response<http::empty_body>> stream_response;

  const HttpRequestHead& head() const override { return request; }

  asio::awaitable<BodyChunk> ReadBodyChunk(uint64_t max_total) override {
    BodyChunk out;
    if (request.content_length && *request.content_length > max_total) {
      close_after = true;  // the unread body makes the connection unusable
      out.error = BodyError::kTooLarge;
      co_return out;
    }
    char buf[kBodyChunk];
    while (!parser->is_done()) {
      parser->get().body().data = buf;
      parser->get().body().size = sizeof buf;
      stream.expires_after(state->options.read_timeout);
      beast::error_code ec;
      co_await http::async_read_some(stream, buffer, *parser,
                                     asio::redirect_error(use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      size_t n = sizeof buf - parser->get().body().size;
      if (ec) {
        close_after = true;
        out.error = (ec == http::error::end_of_stream || ec == asio::error::eof ||
                     ec == beast::error::timeout || ec == asio::error::connection_reset)
                        ? BodyError::kClientGone
                        : BodyError::kBadRequest;
        co_return out;
      }
      body_read += n;
      if (body_read > max_total) {
        close_after = true;
        out.error = BodyError::kTooLarge;
        co_return out;
      }
      if (n > 0) {
        out.data.assign(buf, n);
        co_return out;
      }
    }
    out.end = true;
    co_return out;
  }

  bool KeepAlive() const {
    return !close_after && !state->stopping && parser->is_done() && parser->get().keep_alive();
  }

  template <typename Response>
  void Prepare(Response& res, const HttpResponse& r) {
    res.result(r.status);
    res.set(http::field::server, "code-interpreter");
    if (!r.content_type.empty()) res.set(http::field::content_type, r.content_type);
    res.set("X-Request-Id", request.request_id);
    for (const auto& [k, v] : r.headers) res.set(k, v);
    res.keep_alive(KeepAlive());
  }

  asio::awaitable<void> Respond(HttpResponse r) override {
    responded = true;
    beast::error_code ec;
    stream.expires_after(state->options.read_timeout);
    if (!r.file_path.empty()) {
      http::response<http::file_body> res;
      res.body().open(r.file_path.c_str(), beast::file_mode::scan, ec);
      if (ec) {
        spdlog::error("[{}] cannot open {} for sending: {}", request.request_id, r.file_path,
                      ec.message());
        co_await Respond(ErrorResponse(500, "Internal Server Error"));
        co_return;
      }
      Prepare(res, r);
      res.prepare_payload();
      co_await http::async_write(stream, res, asio::redirect_error(use_awaitable, ec));
    } else {
      http::response<http::string_body> res;
      Prepare(res, r);
      res.body() = std::move(r.body);
      res.prepare_payload();
      co_await http::async_write(stream, res, asio::redirect_error(use_awaitable, ec));
    }
    if (ec) close_after = true;
    spdlog::info("[{}] {} {} -> {}{}", request.request_id, request.method,
                 WithShortIds(request.target), r.status, Caller());
  }

  // " by NAME" once the router knew the API key's name (never the key).
  std::string Caller() const { return client.empty() ? "" : " by " + client; }

  asio::awaitable<Status> BeginStream(int status, HeaderList headers) override {
    responded = true;
    close_after = true;  // the stream ends the connection
    stream_response.emplace();
    HttpResponse r;
    r.status = status;
    r.content_type = "text/event-stream; charset=utf-8";
    r.headers = std::move(headers);
    Prepare(*stream_response, r);
    stream_response->set(http::field::connection, "close");
    stream_response->chunked(true);
    stream_serializer.emplace(*stream_response);
    beast::error_code ec;
    stream.expires_after(state->options.read_timeout);
    co_await http::async_write_header(stream, *stream_serializer,
                                      asio::redirect_error(use_awaitable, ec));
    spdlog::info("[{}] {} {} -> {} (stream){}", request.request_id, request.method,
                 WithShortIds(request.target), status, Caller());
    if (ec) co_return Status::Error("client went away: " + ec.message());
    co_return Status();
  }

  asio::awaitable<Status> WriteStream(std::string data) override {
    beast::error_code ec;
    stream.expires_after(state->options.read_timeout);
    co_await asio::async_write(stream, http::make_chunk(asio::buffer(data)),
                               asio::redirect_error(use_awaitable, ec));
    if (ec) co_return Status::Error("client went away: " + ec.message());
    co_return Status();
  }

  asio::awaitable<void> EndStream() override {
    beast::error_code ec;
    stream.expires_after(state->options.read_timeout);
    co_await asio::async_write(stream, http::make_chunk_last(),
                               asio::redirect_error(use_awaitable, ec));
  }

  void WatchClient(std::function<void()> on_gone) override {
    watching = true;
    unwatched = false;
    asio::co_spawn(
        stream.get_executor(),
        [this, on_gone = std::move(on_gone)]() -> asio::awaitable<void> {
          beast::error_code ec = asio::error::operation_aborted;
          // Readable means data (a pipelined request: the client is still there) or EOF.
          if (!unwatched) {
            co_await stream.socket().async_wait(tcp::socket::wait_read,
                                                asio::redirect_error(use_awaitable, ec));
          }
          if (ec != asio::error::operation_aborted) {
            char c;
            ssize_t n = ::recv(stream.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
              spdlog::info("[{}] client closed the connection", request.request_id);
              close_after = true;
              on_gone();
            }
          }
          watching = false;
          watch_done.cancel();
        },
        asio::detached);
  }

  asio::awaitable<void> UnwatchClient() override {
    if (!watching) co_return;
    unwatched = true;
    beast::error_code ec;
    stream.socket().cancel(ec);
    watch_done.expires_at(asio::steady_timer::time_point::max());
    while (watching) {
      co_await watch_done.async_wait(asio::redirect_error(use_awaitable, ec));
    }
  }

  asio::awaitable<void> Serve() {
    for (;;) {
      parser.emplace();
      parser->header_limit(kHeaderLimit);
      parser->body_limit(std::numeric_limits<std::uint64_t>::max());  // handlers enforce limits
      responded = false;
      close_after = false;
      body_read = 0;
      idle = true;
      idle_since = std::chrono::steady_clock::now();
      if (state->stopping) break;
      stream.expires_after(state->options.idle_timeout);
      beast::error_code ec;
      co_await http::async_read_header(stream, buffer, *parser,
                                       asio::redirect_error(use_awaitable, ec));
      idle = false;
      // A buffer_body parser reports need_buffer once the header is complete and body bytes
      // follow: that is success for a header read.
      if (ec == http::error::need_buffer) ec = {};
      if (ec) {
        spdlog::debug("connection closed while waiting for a request: {}", ec.message());
        if (ec == http::error::header_limit || ec == http::error::bad_method ||
            ec == http::error::bad_target || ec == http::error::bad_version ||
            ec == http::error::bad_field || ec == http::error::bad_value ||
            ec == http::error::bad_content_length || ec == http::error::bad_transfer_encoding) {
          request = {};
          request.request_id = NewRequestId();
          close_after = true;
          const int status = ec == http::error::header_limit ? 431 : 400;
          co_await Respond(ErrorResponse(status, "Bad request: " + ec.message()));
        }
        break;
      }
      FillRequestHead();
      if (std::optional<HttpResponse> refused = FramingError()) {
        close_after = true;
        co_await Respond(std::move(*refused));
        break;
      }
      try {
        co_await state->handler(*this);
      } catch (const std::exception& e) {
        spdlog::error("[{}] unhandled error: {}", request.request_id, e.what());
        close_after = true;
      }
      if (!responded) co_await Respond(ErrorResponse(500, "Internal Server Error"));
      co_await UnwatchClient();
      if (!KeepAlive()) break;
    }
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    co_await LingerOnUnreadBody();
    stream.close();
  }

  // After an answer given without reading the whole body (413, 507, a bad header), closing at
  // once makes the kernel reset the connection while the client is still sending, and most
  // clients (httpx, requests) then report a broken pipe instead of the answer. So, as nginx's
  // lingering close, the rest is read and dropped first, within bounds, until the client closes.
  asio::awaitable<void> LingerOnUnreadBody() {
    if (!parser || parser->is_done()) co_return;
    idle = true;  // shutdown or the cap may cut it short
    idle_since = std::chrono::steady_clock::now();
    stream.expires_after(kLingerTime);
    std::vector<char> buf(kBodyChunk);
    uint64_t dropped = 0;
    while (dropped < kLingerMaxBytes) {
      beast::error_code ec;
      size_t n = co_await stream.async_read_some(asio::buffer(buf),
                                                 asio::redirect_error(use_awaitable, ec));
      if (ec) break;  // the client closed (EOF), or the time is up
      dropped += n;
    }
    spdlog::debug("[{}] dropped {} unread body bytes before closing", request.request_id, dropped);
  }

  // RFC 9112 6.3: a request's body is framed by chunked coding or by one Content-Length. Any
  // other transfer coding, both at once, or two lengths would leave the body to be read as the
  // next request: refused (501, 400), and the connection closes after the answer.
  std::optional<HttpResponse> FramingError() const {
    int lengths = 0;
    int codings = 0;
    std::string_view coding;
    for (const auto& f : parser->get()) {
      if (f.name() == http::field::content_length) ++lengths;
      if (f.name() == http::field::transfer_encoding) {
        ++codings;
        coding = f.value();
      }
    }
    while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t')) {
      coding.remove_suffix(1);
    }
    if (codings > 0 && lengths > 0) {
      return ErrorResponse(400, "Bad request: Content-Length and Transfer-Encoding together");
    }
    if (lengths > 1) return ErrorResponse(400, "Bad request: more than one Content-Length");
    if (codings > 1 || (codings == 1 && !beast::iequals(coding, "chunked"))) {
      return ErrorResponse(501, "Transfer-Encoding '" + std::string(coding) +
                                    "' is not supported: send the body with Content-Length or "
                                    "Transfer-Encoding: chunked");
    }
    return std::nullopt;
  }

  // Ends a connection waiting for a request: its Serve loop sees the error and returns.
  void CloseIdle() {
    beast::error_code ec;
    stream.socket().cancel(ec);
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  }

  void FillRequestHead() {
    const auto& msg = parser->get();
    request = {};
    request.method = std::string(msg.method_string());
    request.target = std::string(msg.target());
    request.path = request.target.substr(0, request.target.find('?'));
    for (const auto& f : msg) {
      std::string name(f.name_string());
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      request.headers.emplace_back(std::move(name), std::string(f.value()));
    }
    if (auto len = parser->content_length()) request.content_length = *len;
    request.request_id = NewRequestId();
    spdlog::debug("[{}] {} {}", request.request_id, request.method, WithShortIds(request.target));
  }
};

bool HttpServer::State::CloseLongestIdle() {
  Connection* longest = nullptr;
  for (Connection* c : connections) {
    if (c->idle && (!longest || c->idle_since < longest->idle_since)) longest = c;
  }
  if (!longest) return false;
  longest->CloseIdle();
  return true;
}

void HttpServer::State::LogAcceptFailure(const beast::error_code& ec) {
  ++failures_unlogged;
  const auto now = std::chrono::steady_clock::now();
  if (now - failure_logged < kFailureLogInterval) return;
  spdlog::warn(
      "accept failed: {} ({} time(s) since the last such line; {} connections open, at "
      "most {}){}",
      ec.message(), failures_unlogged, connections.size(), options.max_connections,
      OutOfResources(ec) ? ". Raise the daemon's LimitNOFILE (ulimit -n), or lower "
                           "MAX_CONNECTIONS to keep more descriptors for sandboxes"
                         : "");
  failure_logged = now;
  failures_unlogged = 0;
}

HttpServer::HttpServer(asio::io_context& io, HttpServerOptions options, HttpHandler handler)
    : state_(std::make_shared<State>(io, std::move(options), std::move(handler))) {}

HttpServer::~HttpServer() = default;

Status HttpServer::Listen() {
  beast::error_code ec;
  auto address = asio::ip::make_address(state_->options.host, ec);
  if (ec) return Status::Error("invalid HOST '" + state_->options.host + "': " + ec.message());
  tcp::endpoint ep(address, state_->options.port);
  auto& a = state_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Error("cannot listen on " + state_->options.host + ":" +
                         std::to_string(state_->options.port) + ": " + ec.message() +
                         " (is another server using the port? set PORT)");
  }
  return Status();
}

Status HttpServer::Adopt(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Status::Errno(std::string("adopting listening socket ") + std::to_string(fd), errno);
  }
  beast::error_code ec;
  state_->acceptor.assign(addr.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
  if (ec)
    return Status::Error(std::string("adopting listening socket ") + std::to_string(fd) + ": " +
                         ec.message());
  return Status();
}

asio::ip::tcp::endpoint HttpServer::local_endpoint() const {
  beast::error_code ec;
  return state_->acceptor.local_endpoint(ec);
}

void HttpServer::Start() {
  asio::co_spawn(
      state_->io,
      [state = state_]() -> asio::awaitable<void> {
        while (!state->stopping) {
          beast::error_code ec;
          if (state->connections.size() >= state->options.max_connections) {
            // At the cap: once a client is waiting, the longest idle connection makes room.
            co_await state->acceptor.async_wait(tcp::acceptor::wait_read,
                                                asio::redirect_error(use_awaitable, ec));
            if (ec) {  // closed at shutdown: the loop ends
              if (!state->stopping) co_await state->WaitForRoom(kAcceptBackoff);
              continue;
            }
            const bool closed = state->CloseLongestIdle();
            const auto backoff = closed ? kAcceptBackoff : std::chrono::seconds(1);
            co_await state->WaitForRoom(backoff);
            continue;
          }
          tcp::socket socket =
              co_await state->acceptor.async_accept(asio::redirect_error(use_awaitable, ec));
          if (ec) {
            if (state->stopping || ec == asio::error::operation_aborted) break;
            state->LogAcceptFailure(ec);
            if (OutOfResources(ec)) {
              // Retrying at once would spin: free a descriptor if an idle client holds one.
              state->CloseLongestIdle();
              co_await state->WaitForRoom(kAcceptBackoff);
            }
            continue;
          }
          socket.set_option(tcp::no_delay(true), ec);
          asio::co_spawn(
              state->io,
              [state, socket = std::move(socket)]() mutable -> asio::awaitable<void> {
                auto conn = std::make_unique<Connection>(state, std::move(socket));
                state->connections.insert(conn.get());
                try {
                  co_await conn->Serve();
                } catch (const std::exception& e) {
                  spdlog::error("connection error: {}", e.what());
                }
                co_await conn->UnwatchClient();
                state->connections.erase(conn.get());
                state->room.cancel();
              },
              asio::detached);
        }
      },
      asio::detached);
}

void HttpServer::StopAccepting() {
  state_->stopping = true;
  beast::error_code ec;
  state_->acceptor.close(ec);
}

void HttpServer::CloseIdleConnections() {
  for (Connection* c : state_->connections) {
    if (c->idle) c->CloseIdle();
  }
}

size_t HttpServer::open_connections() const { return state_->connections.size(); }

size_t HttpServer::max_connections() const { return state_->options.max_connections; }

}  // namespace ci::daemon
