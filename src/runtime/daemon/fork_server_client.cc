#include "runtime/daemon/fork_server_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstring>

#include "runtime/parent/fork_server.h"
#include "runtime/wire/fd_passing.h"

namespace ci::runtime {
namespace {

// How long one fork may take before the zygote counts as hung, and its start (Python and the warm
// imports) at most.
constexpr auto kReplyTimeout = std::chrono::seconds(5);
constexpr int kStartTimeoutMs = 60000;

}  // namespace

ForkServer::ForkServer(asio::any_io_executor ex, pid_t pid, UniqueFd control)
    : pid_(pid),
      control_(ex, control.release()),
      turn_(ex, asio::steady_timer::time_point::max()) {}

Result<std::unique_ptr<ForkServer>> ForkServer::Spawn(asio::any_io_executor ex,
                                                      const std::string& binary,
                                                      const std::vector<std::string>& env,
                                                      const std::vector<std::string>& modules,
                                                      const std::vector<std::string>& sources) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return Status::Errno("socketpair (fork server)", errno);
  }
  UniqueFd ours(pair[0]), theirs(pair[1]);
  posix_spawn_file_actions_t fa;
  ::posix_spawn_file_actions_init(&fa);
  ::posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  ::posix_spawn_file_actions_adddup2(&fa, theirs.get(), kZygoteControlFd);
  ::posix_spawn_file_actions_addclosefrom_np(&fa, kZygoteControlFd + 1);
  HelperSpawnAttr attr;  // as the shims': no terminal, a fresh process's signals
  std::vector<std::string> args = {"code-interpreter", "fork"};
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_copy = env;
  envp.push_back(const_cast<char*>(kZygoteBindNow));
  for (auto& e : env_copy) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  int rc = attr.ok()
               ? ::posix_spawn(&pid, binary.c_str(), &fa, attr.get(), argv.data(), envp.data())
               : EINVAL;
  ::posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return Status::Errno("spawning the fork server " + binary, rc);
  std::unique_ptr<ForkServer> server(new ForkServer(std::move(ex), pid, std::move(ours)));
  std::string list;
  for (const auto& m : modules) list += m + "\n";
  list += '\0';
  for (const auto& s : sources) {
    if (!s.empty() && s.find('\0') == std::string::npos) list += s + '\0';  // else: no Python
  }
  list += '\0';
  if (::send(server->control_.native_handle(), list.data(), list.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(list.size())) {
    return Status::Errno("sending the fork server its modules", errno);
  }
  return server;
}

Status ForkServer::ReadFirstWord() {
  char buf[512];
  ssize_t got = ::recv(control_.native_handle(), buf, sizeof buf, MSG_DONTWAIT);
  if (got == 1 && buf[0] == 'R') return Status();
  failed_ = true;  // its destructor reaps it
  ::kill(pid_, SIGKILL);
  if (got > 1 && buf[0] == 'F')
    return Status::Error("it could not start: " + std::string(buf + 1, got - 1));
  return Status::Error("it exited while starting (see the log above)");
}

Result<std::unique_ptr<ForkServer>> ForkServer::Start(asio::any_io_executor ex,
                                                      const std::string& binary,
                                                      const std::vector<std::string>& env,
                                                      const std::vector<std::string>& modules,
                                                      const std::vector<std::string>& sources) {
  auto server = Spawn(std::move(ex), binary, env, modules, sources);
  if (!server.ok()) return server;
  struct pollfd p = {(*server)->control_.native_handle(), POLLIN, 0};
  int n;
  while ((n = ::poll(&p, 1, kStartTimeoutMs)) < 0 && errno == EINTR) {
  }
  Status ready = n > 0 ? (*server)->ReadFirstWord() : (*server)->NotReadyInTime();
  if (!ready.ok()) return ready;
  return server;
}

asio::awaitable<Result<std::unique_ptr<ForkServer>>> ForkServer::StartAsync(
    asio::any_io_executor ex, std::string binary, std::vector<std::string> env,
    std::vector<std::string> modules, std::vector<std::string> sources) {
  auto server = Spawn(ex, binary, env, modules, sources);
  if (!server.ok()) co_return server;
  ForkServer& s = **server;
  asio::steady_timer guard(ex, std::chrono::milliseconds(kStartTimeoutMs));
  guard.async_wait([&s](boost::system::error_code e) {
    if (!e) s.control_.cancel();
  });
  boost::system::error_code ec;
  co_await s.control_.async_wait(asio::posix::stream_descriptor::wait_read,
                                 asio::redirect_error(asio::use_awaitable, ec));
  guard.cancel();
  Status ready = ec ? s.NotReadyInTime() : s.ReadFirstWord();
  if (!ready.ok()) co_return ready;
  co_return server;
}

Status ForkServer::NotReadyInTime() {
  failed_ = true;
  ::kill(pid_, SIGKILL);
  return Status::Error("it was not ready within " + std::to_string(kStartTimeoutMs / 1000) + " s");
}

ForkServer::~ForkServer() {
  boost::system::error_code ec;
  control_.close(ec);  // EOF: it exits once the last of its sandboxes is gone
  // Normally none is left (the executor drained them); one still held by the daemon keeps the
  // zygote up to 2 s more, then it is killed (its inits die with it, their death signal).
  for (int waited_ms = 0; waited_ms < 2000; waited_ms += 10) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    ::usleep(10 * 1000);
  }
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

void ForkServer::Fail(const std::string& why) {
  if (!failed_) {
    spdlog::warn(
        "fork server: {}; Python sandboxes start their own interpreter until it is restarted", why);
  }
  failed_ = true;
  ::kill(pid_, SIGKILL);
}

asio::awaitable<Result<ShimHandles>> ForkServer::NewSandbox() {
  boost::system::error_code ec;
  while (busy_ && !failed_) {
    co_await turn_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (failed_) co_return Status::Error("the fork server does not serve");
  busy_ = true;
  Result<ShimHandles> sandbox = co_await Request();
  busy_ = false;
  turn_.cancel();  // the next request goes
  co_return sandbox;
}

asio::awaitable<Result<ShimHandles>> ForkServer::Request() {
  Result<ShimChannels> channels = MakeShimChannels();
  if (!channels.ok()) co_return channels.status();
  std::vector<int> fds;
  for (const auto& fd : channels->shim) fds.push_back(fd.get());
  if (int err = SendWithFds(control_.native_handle(), "S", fds); err != 0) {
    Fail(std::string("sending a request: ") + std::strerror(err));
    co_return Status::Error("the fork server is gone");
  }
  for (auto& fd : channels->shim) fd.reset();  // the zygote holds them now
  // The answer: the zygote is the sandbox's parent. A zygote silent for 5 s counts as hung.
  asio::steady_timer guard(control_.get_executor(), kReplyTimeout);
  guard.async_wait([this](boost::system::error_code e) {
    if (!e) control_.cancel();
  });
  boost::system::error_code ec;
  co_await control_.async_wait(asio::posix::stream_descriptor::wait_read,
                               asio::redirect_error(asio::use_awaitable, ec));
  guard.cancel();
  if (ec) {
    Fail("no answer within 5 s");
    co_return Status::Error("the fork server did not answer");
  }
  int32_t answer = -1;
  std::vector<int> passed;
  int err = ReceiveWithFds(control_.native_handle(), &answer, sizeof answer, &passed);
  for (int fd : passed) ::close(fd);
  if (err != 0 || answer != kZygoteSupervises) {
    Fail("its answer was cut short or not one it gives");
    co_return Status::Error("the fork server is gone");
  }
  ShimHandles h = std::move(channels->daemon);
  h.pid = 0;  // no process of its own: the lifecycle socket's EOF ends its teardown
  co_return h;
}

}  // namespace ci::runtime
