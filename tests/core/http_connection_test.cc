// The HTTP clients' one connection layer (core/http_connection.h) against a scripted peer on a
// real socket: each step's failure is named, the body cap holds, a body is read in the pieces
// it arrives in, and an upgraded connection's bytes read past the header come first. TLS and the
// clients' protocols are tested by each client's suite.
#include "core/http_connection.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdlib>
#include <string>
#include <thread>

namespace ci::net {
namespace {

using namespace std::chrono_literals;

// A unix socket that answers one connection with `answer` (after reading the request's header),
// then waits for the client to close.
class ScriptedPeer {
 public:
  explicit ScriptedPeer(std::string answer) : answer_(std::move(answer)) {
    char dir[] = "/tmp/http-connection-XXXXXX";
    path_ = std::string(::mkdtemp(dir)) + "/sock";
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path_.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd_, 4), 0);
    thread_ = std::thread([this] {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string got;
      char buf[4096];
      while (got.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::read(c, buf, sizeof(buf));
        if (n <= 0) break;
        got.append(buf, n);
      }
      request_ = got;
      if (!answer_.empty()) (void)!::write(c, answer_.data(), answer_.size());
      while (::read(c, buf, sizeof(buf)) > 0) {
      }
      ::close(c);
    });
  }
  ~ScriptedPeer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  Peer peer() const {
    Peer p;
    p.unix_path = path_;
    return p;
  }
  const std::string& request() const { return request_; }

 private:
  std::string answer_, path_, request_;
  int fd_ = -1;
  std::thread thread_;
};

template <typename F>
auto RunIo(F f) {
  boost::asio::io_context io;
  auto future = boost::asio::co_spawn(io, f(io.get_executor()), boost::asio::use_future);
  io.run();
  return future.get();
}

http::request<http::string_body> Get() {
  http::request<http::string_body> req(http::verb::get, "/x", 11);
  req.set(http::field::host, "test");
  return req;
}

Connection Opened(Outcome<Connection>& o) {
  if (auto* f = std::get_if<Failure>(&o)) ADD_FAILURE() << "open failed: " << f->ec.message();
  return std::move(std::get<Connection>(o));
}

// One GET with a 100-byte body cap, its answer awaited for `read_for`.
Outcome<Reply> ExchangeWith(const ScriptedPeer& server, std::chrono::milliseconds read_for) {
  return RunIo([&](auto ex) -> asio::awaitable<Outcome<Reply>> {
    auto o = co_await Connection::Open(ex, server.peer(), Clock::now() + 5s);
    Connection c = Opened(o);
    c.ExpiresAfter(read_for);
    auto r = co_await c.Exchange(Get(), 100);
    c.Close();
    co_return r;
  });
}

TEST(HttpConnection, ExchangesOverAUnixSocket) {
  ScriptedPeer server("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello");
  Outcome<Reply> reply = ExchangeWith(server, 5s);
  ASSERT_TRUE(std::holds_alternative<Reply>(reply));
  EXPECT_EQ(std::get<Reply>(reply).result_int(), 200u);
  EXPECT_EQ(std::get<Reply>(reply).body(), "hello");
  EXPECT_EQ(std::get<Reply>(reply)["X-A"], "b");
  EXPECT_EQ(server.request().rfind("GET /x HTTP/1.1\r\n", 0), 0u) << server.request();
}

TEST(HttpConnection, ABodyOverTheCapIsTooLargeNotRead) {
  ScriptedPeer server("HTTP/1.1 200 OK\r\nContent-Length: 101\r\n\r\n");
  Outcome<Reply> reply = ExchangeWith(server, 5s);
  ASSERT_TRUE(std::holds_alternative<Failure>(reply));
  EXPECT_EQ(std::get<Failure>(reply).step, Step::kTooLarge);
}

TEST(HttpConnection, ASilentPeerTimesOutReading) {
  ScriptedPeer server("");
  Outcome<Reply> reply = ExchangeWith(server, 200ms);
  ASSERT_TRUE(std::holds_alternative<Failure>(reply));
  EXPECT_EQ(std::get<Failure>(reply).step, Step::kRead);
  EXPECT_TRUE(std::get<Failure>(reply).timed_out);
}

TEST(HttpConnection, EachConnectStepIsNamed) {
  Peer missing;
  missing.unix_path = "/nonexistent/sock";
  Peer no_name;
  no_name.host = "no-such-host.invalid";
  no_name.port = 80;
  Peer refused;  // a tcp port nobody listens on: bound, never listened
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor holder(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  refused.host = "127.0.0.1";
  refused.port = holder.local_endpoint().port();
  holder.close();
  for (const auto& [peer, step] :
       {std::pair{missing, Step::kConnect}, std::pair{no_name, Step::kResolve},
        std::pair{refused, Step::kConnect}}) {
    // co_spawn's result must be default-constructible: the failure, or none.
    std::optional<Failure> f = RunIo([&](auto ex) -> asio::awaitable<std::optional<Failure>> {
      auto o = co_await Connection::Open(ex, peer, Clock::now() + 10s);
      if (auto* failed = std::get_if<Failure>(&o)) co_return *failed;
      co_return std::nullopt;
    });
    ASSERT_TRUE(f.has_value()) << peer.unix_path << peer.host;
    EXPECT_EQ(f->step, step) << peer.unix_path << peer.host;
    EXPECT_FALSE(f->timed_out);
  }
}

TEST(HttpConnection, ABodyComesInThePiecesItArrivesIn) {
  ScriptedPeer server(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "6\r\nline1\n\r\n6\r\nline2\n\r\n0\r\n\r\n");
  std::string body = RunIo([&](auto ex) -> asio::awaitable<std::string> {
    auto o = co_await Connection::Open(ex, server.peer(), Clock::now() + 5s);
    Connection c = Opened(o);
    auto req = Get();
    auto f = co_await c.Start(req);
    EXPECT_FALSE(f.has_value());
    EXPECT_EQ(c.header().result_int(), 200u);
    std::string all;
    while (!c.body_done()) {
      auto got = co_await c.ReadBody();
      if (std::holds_alternative<Failure>(got)) break;
      all.append(std::get<std::string_view>(got));
    }
    c.Close();
    co_return all;
  });
  EXPECT_EQ(body, "line1\nline2\n");
}

TEST(HttpConnection, AnUpgradedConnectionStartsWithTheBytesPastTheHeader) {
  ScriptedPeer server("HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\nraw!");
  std::string raw = RunIo([&](auto ex) -> asio::awaitable<std::string> {
    auto o = co_await Connection::Open(ex, server.peer(), Clock::now() + 5s);
    Connection c = Opened(o);
    auto req = Get();
    auto f = co_await c.Start(req);
    EXPECT_FALSE(f.has_value());
    EXPECT_EQ(c.header().result_int(), 101u);
    c.ExpiresNever();
    char buf[16];
    boost::system::error_code ec;
    const size_t n = co_await c.ReadSome(boost::asio::buffer(buf), ec);
    c.Close();
    co_return std::string(buf, n);
  });
  EXPECT_EQ(raw, "raw!");
}

}  // namespace
}  // namespace ci::net
