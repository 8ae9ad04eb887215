// The daemon's side of systemd without libsystemd: notify datagrams to a real AF_UNIX datagram
// socket that the test binds (a path and an abstract name), and socket activation with a real
// listening TCP socket passed as the inherited fd, served over HTTP by HttpServer::Adopt.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include "common/http_client.h"
#include "daemon/cli/systemd_notify.h"
#include "daemon/http/http_server.h"
#include "daemon/http/socket_activation.h"

namespace ci::daemon {
namespace {

// A datagram socket standing in for systemd's notify socket. `abstract`: bound to "@name".
class NotifyListener {
 public:
  explicit NotifyListener(bool abstract) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    std::string name =
        std::string("ci-notify-test-") + std::to_string(::getpid()) + (abstract ? "-a" : "-p");
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    socklen_t len;
    if (abstract) {
      address_ = "@" + name;
      std::memcpy(addr.sun_path + 1, name.data(), name.size());
      len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    } else {
      address_ = ::testing::TempDir() + name;
      ::unlink(address_.c_str());
      std::memcpy(addr.sun_path, address_.data(), address_.size());
      len = sizeof(addr);
    }
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len), 0) << std::strerror(errno);
    timeval tv{5, 0};  // a missing datagram fails the test instead of hanging it
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~NotifyListener() {
    ::close(fd_);
    if (address_[0] == '/') ::unlink(address_.c_str());
  }
  const std::string& address() const { return address_; }
  std::string Receive() const {
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    return n < 0 ? std::string("<nothing: ") + std::string(std::strerror(errno)) + ">"
                 : std::string(buf, n);
  }

 private:
  int fd_ = -1;
  std::string address_;
};

TEST(SystemdNotifyTest, SendsTheStateToAPathSocket) {
  NotifyListener listener(false);
  Status s = SystemdNotifyTo(listener.address().c_str(), "READY=1\nSTATUS=serving");
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(listener.Receive(), "READY=1\nSTATUS=serving");
}

TEST(SystemdNotifyTest, SendsTheStateToAnAbstractSocket) {
  NotifyListener listener(true);
  Status s = SystemdNotifyTo(listener.address().c_str(), "STOPPING=1");
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(listener.Receive(), "STOPPING=1");
}

TEST(SystemdNotifyTest, ReadyReadsNotifySocketFromTheEnvironment) {
  NotifyListener listener(true);
  ::setenv("NOTIFY_SOCKET", listener.address().c_str(), 1);
  SystemdReady("serving on port 8000\nlanguages python");
  ::unsetenv("NOTIFY_SOCKET");
  // A newline in the status text would start another variable: it is replaced.
  EXPECT_EQ(listener.Receive(), "READY=1\nSTATUS=serving on port 8000 languages python");
}

TEST(SystemdNotifyTest, NothingToDoWithoutNotifySocket) {
  EXPECT_TRUE(SystemdNotifyTo(nullptr, "READY=1").ok());
  EXPECT_TRUE(SystemdNotifyTo("", "READY=1").ok());
}

TEST(SystemdNotifyTest, ErrorsNameTheSocket) {
  Status relative = SystemdNotifyTo("relative/path", "READY=1");
  EXPECT_FALSE(relative.ok());
  Status absent = SystemdNotifyTo("/nonexistent/notify.sock", "READY=1");
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.message().find("/nonexistent/notify.sock"), std::string::npos);
}

// A socket of `type` on 127.0.0.1 with a kernel-chosen port; listening when `listen` is set.
int LoopbackSocket(int type, bool listen) {
  int fd = ::socket(AF_INET, type, 0);  // no CLOEXEC: as systemd passes it
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  if (listen) {
    EXPECT_EQ(::listen(fd, 16), 0);
  }
  return fd;
}

uint16_t PortOf(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(SocketActivationTest, TakesThePassedListeningSocket) {
  int fd = LoopbackSocket(SOCK_STREAM, true);
  auto env = Env({{"LISTEN_PID", std::to_string(::getpid())},
                  {"LISTEN_FDS", "1"},
                  {"LISTEN_FDNAMES", "code-interpreter.socket"}});
  Result<int> got = ListenFdFromEnv(env, ::getpid(), fd);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, fd);
  // No sandbox or child may inherit the daemon's listening socket.
  EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC);
  ::close(fd);
}

TEST(SocketActivationTest, NoneWhenNotPassedToThisProcess) {
  EXPECT_EQ(*ListenFdFromEnv(Env({}), ::getpid()), -1);
  // Inherited from a parent that was activated: LISTEN_PID names that parent.
  auto env = Env({{"LISTEN_PID", std::to_string(::getpid() + 1)}, {"LISTEN_FDS", "1"}});
  EXPECT_EQ(*ListenFdFromEnv(env, ::getpid()), -1);
}

TEST(SocketActivationTest, RefusesWhatIsNotOneListeningTcpSocket) {
  std::string self = std::to_string(::getpid());
  int listening = LoopbackSocket(SOCK_STREAM, true);
  EXPECT_FALSE(
      ListenFdFromEnv(Env({{"LISTEN_PID", self}, {"LISTEN_FDS", "2"}}), ::getpid(), listening)
          .ok());
  EXPECT_FALSE(ListenFdFromEnv(Env({{"LISTEN_PID", self}}), ::getpid(), listening).ok());
  int bound_only = LoopbackSocket(SOCK_STREAM, false);
  int udp = LoopbackSocket(SOCK_DGRAM, false);
  for (int fd : {bound_only, udp}) {
    Result<int> got =
        ListenFdFromEnv(Env({{"LISTEN_PID", self}, {"LISTEN_FDS", "1"}}), ::getpid(), fd);
    ASSERT_FALSE(got.ok());
    EXPECT_NE(got.status().message().find("not a listening TCP socket"), std::string::npos);
  }
  for (int fd : {listening, bound_only, udp}) ::close(fd);
}

TEST(SocketActivationTest, HttpServerServesOnTheAdoptedSocket) {
  int fd = LoopbackSocket(SOCK_STREAM, true);
  uint16_t port = PortOf(fd);
  asio::io_context io(1);
  // HOST:PORT that cannot be bound: the adopted socket is used, not these.
  HttpServerOptions options;
  options.host = "192.0.2.1";
  options.port = 1;
  HttpServer server(io, options, [](HttpExchange& ex) -> asio::awaitable<void> {
    HttpResponse r;
    r.body = "{\"adopted\":true}";
    co_await ex.Respond(std::move(r));
  });
  Status s = server.Adopt(fd);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(server.local_endpoint().port(), port);
  server.Start();
  std::thread loop([&io] { io.run(); });
  testing_support::HttpReply reply = testing_support::HttpClient(port).Get("/anything");
  asio::post(io, [&] {
    server.StopAccepting();
    server.CloseIdleConnections();
    io.stop();
  });
  loop.join();
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "{\"adopted\":true}");
}

}  // namespace
}  // namespace ci::daemon
