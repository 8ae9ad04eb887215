#include "runtime/fork_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "runtime/fd_passing.h"
#include "runtime/zygote.h"

namespace ci::runtime {
namespace {

// How long one fork may take before the zygote counts as hung, and its start (Python and the warm
// imports) at most.
constexpr int kReplyTimeoutMs = 5000;
constexpr int kStartTimeoutMs = 60000;

}  // namespace

Result<std::unique_ptr<ForkServer>> ForkServer::Start(const std::string& binary,
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
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);  // as the shims: no terminal
  std::vector<std::string> args = {"code-interpreter", "fork"};
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_copy = env;
  for (auto& e : env_copy) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, binary.c_str(), &fa, &attr, argv.data(), envp.data());
  ::posix_spawnattr_destroy(&attr);
  ::posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return Status::Errno("spawning the fork server " + binary, rc);
  std::unique_ptr<ForkServer> server(new ForkServer(pid, std::move(ours)));
  std::string list;
  for (const auto& m : modules) list += m + "\n";
  list += '\0';
  for (const auto& s : sources) {
    if (!s.empty() && s.find('\0') == std::string::npos) list += s + '\0';  // else: no Python
  }
  list += '\0';
  if (::send(server->control_.get(), list.data(), list.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(list.size())) {
    return Status::Errno("sending the fork server its modules", errno);
  }
  // Its first word: ready, or why not.
  struct pollfd p = {server->control_.get(), POLLIN, 0};
  int n;
  while ((n = ::poll(&p, 1, kStartTimeoutMs)) < 0 && errno == EINTR) {
  }
  char buf[512];
  ssize_t got = n > 0 ? ::recv(server->control_.get(), buf, sizeof buf, 0) : -1;
  if (got == 1 && buf[0] == 'R') return server;
  if (got > 1 && buf[0] == 'F')
    return Status::Error("it could not start: " + std::string(buf + 1, got - 1));
  if (n == 0) return Status::Error("it was not ready within 60 s");
  return Status::Error("it exited while starting (see the log above)");
}

ForkServer::~ForkServer() {
  control_.reset();  // EOF: it exits
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

void ForkServer::Fail(const std::string& why) {
  if (!failed_) {
    spdlog::warn("fork server: {}; Python sandboxes start their own interpreter from now on", why);
  }
  failed_ = true;
  ::kill(pid_, SIGKILL);
}

bool ForkServer::Ready() {
  std::lock_guard<std::mutex> lock(mu_);
  return !failed_;
}

Result<ShimHandles> ForkServer::SpawnShim() {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_) return Status::Error("the fork server does not serve");
  Result<ShimChannels> channels = MakeShimChannels();
  if (!channels.ok()) return channels.status();
  std::vector<int> fds;
  for (const auto& fd : channels->shim) fds.push_back(fd.get());
  if (int err = SendWithFds(control_.get(), "S", fds); err != 0) {
    Fail(std::string("sending a request: ") + std::strerror(err));
    return Status::Error("the fork server is gone");
  }
  for (auto& fd : channels->shim) fd.reset();  // the shim holds them now
  // The reply: the child's pid with its pidfd.
  struct pollfd p = {control_.get(), POLLIN, 0};
  if (::poll(&p, 1, kReplyTimeoutMs) <= 0) {
    Fail("no answer within 5 s");
    return Status::Error("the fork server did not answer");
  }
  int32_t pid = 0;
  std::vector<int> passed;
  int err = ReceiveWithFds(control_.get(), &pid, sizeof pid, &passed);
  UniqueFd pidfd(passed.empty() ? -1 : passed[0]);
  for (size_t i = 1; i < passed.size(); ++i) ::close(passed[i]);
  if (err != 0) {
    Fail("its answer was cut short");
    return Status::Error("the fork server is gone");
  }
  if (pid <= 0 || !pidfd.valid()) return Status::Error("the fork server could not fork a shim");
  ShimHandles h = std::move(channels->daemon);
  h.pid = pid;
  h.pidfd = std::move(pidfd);
  return h;
}

}  // namespace ci::runtime
