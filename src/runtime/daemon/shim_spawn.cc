#include "runtime/daemon/shim_spawn.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "core/pidfd.h"
#include "runtime/init/sandbox_init.h"

namespace ci::runtime {
namespace {

Status SetNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return Status::Errno("fcntl O_NONBLOCK", errno);
  }
  return {};
}

class FileActions {
 public:
  FileActions() { ok_ = ::posix_spawn_file_actions_init(&fa_) == 0; }
  ~FileActions() {
    if (ok_) ::posix_spawn_file_actions_destroy(&fa_);
  }
  posix_spawn_file_actions_t* get() { return &fa_; }
  bool ok() const { return ok_; }

 private:
  posix_spawn_file_actions_t fa_;
  bool ok_ = false;
};

}  // namespace

HelperSpawnAttr::HelperSpawnAttr() {
  if (::posix_spawnattr_init(&attr_) != 0) return;
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  ok_ = ::posix_spawnattr_setsigdefault(&attr_, &all) == 0 &&
        ::posix_spawnattr_setsigmask(&attr_, &none) == 0 &&
        ::posix_spawnattr_setflags(
            &attr_, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK) == 0;
}

HelperSpawnAttr::~HelperSpawnAttr() { ::posix_spawnattr_destroy(&attr_); }

Result<ShimChannels> MakeShimChannels() {
  ShimChannels c;
  ShimHandles& h = c.daemon;
  int lifecycle[2], service[2], in[2], out[2], err[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, lifecycle) != 0) {
    return Status::Errno("socketpair (lifecycle)", errno);
  }
  h.lifecycle.reset(lifecycle[0]);
  c.shim[0].reset(lifecycle[1]);
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, service) != 0) {
    return Status::Errno("socketpair (service)", errno);
  }
  h.service.reset(service[0]);
  c.shim[1].reset(service[1]);
  if (::pipe2(in, O_CLOEXEC) != 0) return Status::Errno("pipe2 (stdin)", errno);
  c.shim[2].reset(in[0]);
  h.stdin_w.reset(in[1]);
  if (::pipe2(out, O_CLOEXEC) != 0) return Status::Errno("pipe2 (stdout)", errno);
  h.stdout_r.reset(out[0]);
  c.shim[3].reset(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return Status::Errno("pipe2 (stderr)", errno);
  h.stderr_r.reset(err[0]);
  c.shim[4].reset(err[1]);
  for (int fd :
       {h.lifecycle.get(), h.service.get(), h.stdin_w.get(), h.stdout_r.get(), h.stderr_r.get()}) {
    if (Status s = SetNonBlocking(fd); !s.ok()) return s;
  }
  return c;
}

Result<ShimHandles> SpawnShim(const std::string& binary) {
  Result<ShimChannels> channels = MakeShimChannels();
  if (!channels.ok()) return channels.status();
  ShimHandles& h = channels->daemon;

  // Two rounds of dup2 in the child: first every source to a number above all of them, then
  // down to 3..7. A single round could overwrite a source that happens to be numbered 3..7.
  const int sources[] = {channels->shim[0].get(), channels->shim[1].get(), channels->shim[2].get(),
                         channels->shim[3].get(), channels->shim[4].get()};
  const int targets[] = {kLifecycleFd, kServiceFd, kProgramStdinFd, kProgramStdoutFd,
                         kProgramStderrFd};
  const int high = *std::max_element(std::begin(sources), std::end(sources)) + 1;
  FileActions fa;
  if (!fa.ok()) return Status::Error("posix_spawn_file_actions_init failed");
  for (int i = 0; i < 5; ++i) ::posix_spawn_file_actions_adddup2(fa.get(), sources[i], high + i);
  ::posix_spawn_file_actions_addopen(fa.get(), 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_addopen(fa.get(), 1, "/dev/null", O_WRONLY, 0);
  for (int i = 0; i < 5; ++i) ::posix_spawn_file_actions_adddup2(fa.get(), high + i, targets[i]);
  // Everything else, even an fd another thread opened without O_CLOEXEC, stays out.
  ::posix_spawn_file_actions_addclosefrom_np(fa.get(), kProgramStderrFd + 1);

  char arg0[] = "code-interpreter";
  char arg1[] = "shim";
  char* argv[] = {arg0, arg1, nullptr};
  char* envp[] = {nullptr};
  // A session of its own (setsid): no controlling terminal, so nothing below the shim can open
  // /dev/tty or push input into the daemon's terminal (TIOCSTI), and outside the daemon's process
  // group, so a Ctrl-C on a foreground daemon reaches the daemon alone; its shutdown then removes
  // the sandboxes in order instead of racing shims that die before removing their cgroups.
  HelperSpawnAttr attr;
  if (!attr.ok()) return Status::Error("posix_spawnattr for the shim failed");
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, binary.c_str(), fa.get(), attr.get(), argv, envp);
  if (rc != 0) return Status::Errno("spawning the shim " + binary, rc);
  h.pid = pid;
  h.pidfd.reset(PidfdOpen(pid));  // O_CLOEXEC by definition
  if (!h.pidfd.valid()) {
    int e = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return Status::Errno("pidfd_open of the shim", e);
  }
  return std::move(h);
}

}  // namespace ci::runtime
