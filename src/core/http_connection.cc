#include "core/http_connection.h"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/async_result.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <limits>
#include <utility>

#include "core/tls_peer.h"

namespace ci::net {
namespace {

namespace ssl = asio::ssl;
using asio::use_awaitable;
using asio::ip::tcp;
using boost::system::error_code;

Failure Failed(Step step, const error_code& ec, Clock::time_point deadline) {
  return Failure{step, ec, ec == beast::error::timeout || Clock::now() >= deadline, {}};
}

struct ResolveOutcome {
  error_code ec;
  tcp::resolver::results_type results;
};

// asio cannot interrupt getaddrinfo (a cancelled lookup still waits for it in the resolver's
// thread), so the lookup races a timer and is abandoned, not cancelled, when the timer wins.
asio::awaitable<ResolveOutcome> ResolveBefore(asio::any_io_executor ex, const Peer& peer,
                                              Clock::time_point deadline) {
  auto race = [ex, host = peer.host, port = std::to_string(peer.port), deadline](auto handler) {
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

asio::awaitable<Outcome<TcpStream>> ConnectTcp(asio::any_io_executor ex, const Peer& peer,
                                               Clock::time_point deadline) {
  TcpStream stream(ex);
  stream.expires_at(deadline);
  error_code ec;
  const asio::ip::address address = asio::ip::make_address(peer.host, ec);
  if (!ec) {
    const tcp::endpoint endpoint(address, peer.port);
    co_await stream.async_connect(endpoint, asio::redirect_error(use_awaitable, ec));
  } else {
    ResolveOutcome resolved = co_await ResolveBefore(ex, peer, deadline);
    if (resolved.ec) co_return Failed(Step::kResolve, resolved.ec, deadline);
    co_await stream.async_connect(resolved.results, asio::redirect_error(use_awaitable, ec));
  }
  if (ec) co_return Failed(Step::kConnect, ec, deadline);
  // Requests and stream frames go out whole: Nagle would hold a frame's last segment until the
  // peer's delayed ACK (40 ms). Go's clients and servers (Docker, Kubernetes) set it too.
  stream.socket().set_option(tcp::no_delay(true), ec);
  co_return std::move(stream);
}

}  // namespace

Connection::Connection(Stream s) : stream_(std::make_unique<Stream>(std::move(s))) {}
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;
Connection::~Connection() = default;

asio::awaitable<Outcome<Connection>> Connection::Open(asio::any_io_executor ex, const Peer& peer,
                                                      Clock::time_point deadline) {
  error_code ec;
  if (!peer.unix_path.empty()) {
    UnixStream s(ex);
    s.expires_at(deadline);
    const asio::local::stream_protocol::endpoint target(peer.unix_path);
    co_await s.async_connect(target, asio::redirect_error(use_awaitable, ec));
    if (ec) co_return Failed(Step::kConnect, ec, deadline);
    Connection c(Stream(std::move(s)));
    c.deadline_ = deadline;
    co_return std::move(c);
  }
  auto connected = co_await ConnectTcp(ex, peer, deadline);
  if (auto* failure = std::get_if<Failure>(&connected)) co_return std::move(*failure);
  TcpStream tcp_stream = std::move(std::get<TcpStream>(connected));
  if (!peer.tls) {
    Connection c(Stream(std::move(tcp_stream)));
    c.deadline_ = deadline;
    co_return std::move(c);
  }
  TlsStream t(std::move(tcp_stream), *peer.tls);
  if (!SetTlsPeer(t.native_handle(), peer.tls_name.empty() ? peer.host : peer.tls_name,
                  peer.verify)) {
    co_return Failure{Step::kTlsSetup, {}, false, {}};
  }
  co_await t.async_handshake(ssl::stream_base::client, asio::redirect_error(use_awaitable, ec));
  if (ec) {
    Failure f = Failed(Step::kHandshake, ec, deadline);
    const long verify = ::SSL_get_verify_result(t.native_handle());
    if (!f.timed_out && verify != X509_V_OK) f.verify_error = X509_verify_cert_error_string(verify);
    co_return f;
  }
  Connection c(Stream(std::move(t)));
  c.deadline_ = deadline;
  co_return std::move(c);
}

void Connection::ExpiresAt(Clock::time_point deadline) {
  deadline_ = deadline;
  std::visit([&](auto& s) { beast::get_lowest_layer(s).expires_at(deadline); }, *stream_);
}

void Connection::ExpiresNever() {
  deadline_ = Clock::time_point::max();
  std::visit([](auto& s) { beast::get_lowest_layer(s).expires_never(); }, *stream_);
}

asio::awaitable<Outcome<Reply>> Connection::Exchange(const http::request<http::string_body>& req,
                                                     uint64_t body_limit) {
  auto exchange = [&](auto& s) -> asio::awaitable<Outcome<Reply>> {
    error_code ec;
    co_await http::async_write(s, req, asio::redirect_error(use_awaitable, ec));
    if (ec) co_return Failed(Step::kSend, ec, deadline_);
    http::response_parser<http::string_body> parser;
    parser.body_limit(body_limit);
    if (req.method() == http::verb::head) parser.skip(true);
    // The header first: Beast 1.74's async_read parses eagerly past a Content-Length over the
    // limit and loses the body_limit error (then reserves that many bytes), read_header does not.
    co_await http::async_read_header(s, buf_, parser, asio::redirect_error(use_awaitable, ec));
    if (!ec) co_await http::async_read(s, buf_, parser, asio::redirect_error(use_awaitable, ec));
    if (ec == ssl::error::stream_truncated && parser.need_eof()) parser.put_eof(ec);
    if (ec == http::error::body_limit) co_return Failure{Step::kTooLarge, ec, false, {}};
    if (ec) co_return Failed(Step::kRead, ec, deadline_);
    co_return parser.release();
  };
  auto op = std::visit(exchange, *stream_);  // a named local (GCC 12, CONTRIBUTING.md)
  co_return co_await std::move(op);
}

template <typename Request>
asio::awaitable<std::optional<Failure>> Connection::StartImpl(
    Request& req, const std::function<void()>& before_each) {
  auto start = [&](auto& s) -> asio::awaitable<std::optional<Failure>> {
    error_code ec;
    http::request_serializer<typename Request::body_type> serializer(req);
    while (!serializer.is_done()) {
      if (before_each) before_each();
      co_await http::async_write_some(s, serializer, asio::redirect_error(use_awaitable, ec));
      if (ec) co_return Failed(Step::kSend, ec, deadline_);
    }
    parser_ = std::make_unique<http::response_parser<http::buffer_body>>();
    // Not boost::none: Boost 1.74 compares a Content-Length against it as "over the limit".
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    if (before_each) before_each();
    co_await http::async_read_header(s, buf_, *parser_, asio::redirect_error(use_awaitable, ec));
    if (ec) co_return Failed(Step::kRead, ec, deadline_);
    co_return std::nullopt;
  };
  auto op = std::visit(start, *stream_);
  co_return co_await std::move(op);
}

asio::awaitable<std::optional<Failure>> Connection::Start(
    http::request<http::string_body>& req, const std::function<void()>& before_each_write) {
  co_return co_await StartImpl(req, before_each_write);
}

asio::awaitable<std::optional<Failure>> Connection::Start(
    http::request<http::file_body>& req, const std::function<void()>& before_each_write) {
  co_return co_await StartImpl(req, before_each_write);
}

asio::awaitable<std::optional<Failure>> Connection::Start(http::request<http::string_body>& req) {
  static const std::function<void()> kUnchanged;
  co_return co_await StartImpl(req, kUnchanged);
}

const http::response<http::buffer_body>& Connection::header() const { return parser_->get(); }

bool Connection::body_done() const { return parser_->is_done(); }

asio::awaitable<Outcome<std::string_view>> Connection::ReadBody() {
  if (!chunk_) chunk_ = std::make_unique<std::array<char, 64 << 10>>();
  auto& body = parser_->get().body();
  body.data = chunk_->data();
  body.size = chunk_->size();
  body.more = true;
  auto read = [&](auto& s) -> asio::awaitable<error_code> {
    error_code ec;
    co_await http::async_read_some(s, buf_, *parser_, asio::redirect_error(use_awaitable, ec));
    co_return ec;
  };
  auto op = std::visit(read, *stream_);
  error_code ec = co_await std::move(op);
  if (ec == http::error::need_buffer) ec = {};  // our buffer is full: take it, read on
  if (ec) co_return Failed(Step::kRead, ec, deadline_);
  co_return std::string_view(chunk_->data(), chunk_->size() - body.size);
}

asio::awaitable<size_t> Connection::ReadSome(asio::mutable_buffer buf, error_code& ec) {
  ec = {};
  if (buf_.size() > 0) {
    const size_t n = asio::buffer_copy(buf, buf_.data());
    buf_.consume(n);
    co_return n;
  }
  auto read = [&](auto& s) -> asio::awaitable<size_t> {
    co_return co_await s.async_read_some(buf, asio::redirect_error(use_awaitable, ec));
  };
  auto op = std::visit(read, *stream_);
  const size_t n = co_await std::move(op);
  if (ec == asio::error::eof || ec == ssl::error::stream_truncated) ec = {};
  co_return ec ? 0 : n;
}

asio::awaitable<error_code> Connection::WriteAll(std::string_view data) {
  auto write = [&](auto& s) -> asio::awaitable<error_code> {
    error_code ec;
    co_await asio::async_write(s, asio::buffer(data.data(), data.size()),
                               asio::redirect_error(use_awaitable, ec));
    co_return ec;
  };
  auto op = std::visit(write, *stream_);
  co_return co_await std::move(op);
}

void Connection::ShutdownSend() {
  std::visit(
      [](auto& s) {
        error_code ignored;
        beast::get_lowest_layer(s).socket().shutdown(asio::socket_base::shutdown_send, ignored);
      },
      *stream_);
}

void Connection::Close() {
  if (!stream_) return;
  std::visit(
      [](auto& s) {
        error_code ignored;
        auto& socket = beast::get_lowest_layer(s).socket();
        socket.shutdown(asio::socket_base::shutdown_both, ignored);
        socket.close(ignored);
      },
      *stream_);
}

bool Connection::tls() const { return std::holds_alternative<TlsStream>(*stream_); }

TlsStream Connection::ReleaseTls() {
  TlsStream t = std::move(std::get<TlsStream>(*stream_));
  stream_.reset();
  return t;
}

}  // namespace ci::net
