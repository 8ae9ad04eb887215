#include "runtime/zygote.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/pidfd.h"
#include "runtime/embedded_python.h"
#include "runtime/fd_passing.h"
#include "runtime/sandbox_init.h"
#include "runtime/shim.h"

extern char** environ;

namespace ci::runtime {
namespace {

void Log(const std::string& message) {
  std::fprintf(stderr, "code-interpreter zygote[%d]: %s\n", ::getpid(), message.c_str());
}

// Root runs the warm imports in a mount namespace of its own with a private /tmp: what an import
// writes or reads there (matplotlib's configuration and cache under MPLCONFIGDIR=/tmp/...) is
// nobody else's. Its shims inherit the namespace; they use /usr, /sys/fs/cgroup and /run only.
SysError PrivateTmp() {
  if (::geteuid() != 0) return SysOk();
  if (::unshare(CLONE_NEWNS) != 0) return SysFail("unshare mount namespace");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return SysFail("make mounts private");
  }
  if (::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m") != 0) {
    return SysFail("mount tmpfs /tmp");
  }
  return SysOk();
}

// 'S' and five descriptors; false on EOF or a malformed message.
bool ReceiveRequest(std::vector<int>* fds) {
  char byte = 0;
  if (ReceiveWithFds(kZygoteControlFd, &byte, 1, fds) != 0) return false;
  return byte == 'S' && fds->size() == 5;
}

// The child's pid (0: no child) with its pidfd.
void Reply(pid_t pid, int pidfd) {
  int32_t value = pid;
  std::vector<int> fds;
  if (pidfd >= 0) fds.push_back(pidfd);
  (void)SendWithFds(kZygoteControlFd,
                    std::string_view(reinterpret_cast<char*>(&value), sizeof value), fds);
}

// /proc/PID/cmdline of a shim says "code-interpreter shim", forked or spawned (the startup
// reaper and the tests know shims by it): the zygote's "fork" is written over in place (the
// kernel shows this memory), which is why the subcommand has four letters.
void RenameToShim(char** argv) {
  if (std::strlen(argv[1]) == 4) std::memcpy(argv[1], "shim", 4);
}

// The child: the shim, as if spawned by shim_spawn.cc (its own session, fds 3..7, the daemon's
// signal dispositions: SIGPIPE ignored, the rest default).
[[noreturn]] void BecomeShim(const std::vector<int>& fds, char** zygote_argv) {
  RenameToShim(zygote_argv);
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (::setsid() < 0) ::_exit(1);
  // Every source above all targets first, so no dup2 overwrites a source numbered 3..7.
  const int targets[] = {kLifecycleFd, kAgentFd, kProgramStdinFd, kProgramStdoutFd,
                         kProgramStderrFd};
  int high[5];
  for (int i = 0; i < 5; ++i) {
    high[i] = ::fcntl(fds[i], F_DUPFD, kProgramStderrFd + 1);
    if (high[i] < 0) ::_exit(1);
  }
  for (int i = 0; i < 5; ++i) {
    if (::dup2(high[i], targets[i]) != targets[i]) ::_exit(1);
  }
  ::close_range(kProgramStderrFd + 1, ~0U, 0);
  char arg0[] = "code-interpreter";
  char arg1[] = "shim";
  char* argv[] = {arg0, arg1, nullptr};
  ::_exit(ShimMain(2, argv));
}

struct Startup {
  std::vector<std::string> modules;  // the warm imports
  std::vector<std::string> sources;  // to compile ahead
};

// The daemon's first message (zygote.h); what arrived before an EOF or error, parsed as far as
// it goes.
Startup ReceiveStartup() {
  std::string text;
  char buf[16384];
  ssize_t n;
  // It ends at the first "\0\0" after the modules' '\0' (no source is empty).
  auto complete = [&text] {
    size_t modules_end = text.find('\0');
    return modules_end != std::string::npos &&
           text.find(std::string_view("\0\0", 2), modules_end) != std::string::npos;
  };
  while (!complete() && (n = ::recv(kZygoteControlFd, buf, sizeof buf, 0)) > 0) {
    text.append(buf, static_cast<size_t>(n));
  }
  Startup startup;
  size_t modules_end = text.find('\0');
  std::string_view modules = std::string_view(text).substr(0, modules_end);
  for (size_t start = 0, end; (end = modules.find('\n', start)) != std::string_view::npos;
       start = end + 1) {
    startup.modules.emplace_back(modules.substr(start, end - start));
  }
  if (modules_end == std::string::npos) return startup;
  for (size_t start = modules_end + 1, end;
       (end = text.find('\0', start)) != std::string::npos && end > start; start = end + 1) {
    startup.sources.push_back(text.substr(start, end - start));
  }
  return startup;
}

}  // namespace

int ZygoteMain(int argc, char** argv) {
  if (argc != 2) return 2;
  std::vector<std::string> env;
  char** entry = environ;
  if (*entry != nullptr && std::strcmp(*entry, kZygoteBindNow) == 0) ++entry;  // not the sandboxes'
  for (; *entry != nullptr; ++entry) env.emplace_back(*entry);
  Startup startup = ReceiveStartup();
  SysError e = PrivateTmp();
  if (e.ok() && ::chdir("/") != 0) e = SysFail("chdir /");
  if (e.ok()) e = LoadEmbeddedPython(env, startup.modules, startup.sources);
  if (!e.ok()) {
    std::string why = "F" + e.what + (e.err != 0 ? std::string(": ") + std::strerror(e.err) : "");
    (void)::send(kZygoteControlFd, why.data(), why.size(), MSG_NOSIGNAL);
    Log(why.substr(1));
    return 1;
  }
  if (::send(kZygoteControlFd, "R", 1, MSG_NOSIGNAL) != 1) return 0;
  std::vector<int> fds;
  while (ReceiveRequest(&fds)) {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    BeforeEmbeddedPythonFork();
    pid_t pid = ::fork();
    if (pid == 0) BecomeShim(fds, argv);
    AfterEmbeddedPythonFork();
    int pidfd = pid > 0 ? PidfdOpen(pid) : -1;
    if (pid > 0 && pidfd < 0) {  // the daemon could not wait for it: no use
      ::kill(pid, SIGKILL);
      pid = 0;
    }
    Reply(pid > 0 ? pid : 0, pidfd);
    if (pidfd >= 0) ::close(pidfd);
    for (int fd : fds) ::close(fd);
    fds.clear();
  }
  return 0;
}

}  // namespace ci::runtime
