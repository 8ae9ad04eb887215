#include "daemon/cli/pid1_init.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ci::daemon {
namespace {

constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

// A shell's convention, which `docker run` and Kubernetes report as is: N, or 128 + signal.
int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

[[noreturn]] void Supervise(pid_t child, const sigset_t& waited) {
  for (;;) {
    siginfo_t info{};
    int sig = ::sigwaitinfo(&waited, &info);
    if (sig < 0) continue;  // EINTR (a stop/continue): nothing arrived
    if (sig != SIGCHLD) {
      // Who sent it, for the log: pid 0 is outside this PID namespace (docker stop, the host).
      std::fprintf(stderr, "code-interpreter init: signal %d (%s) from pid %d uid %u; passed on\n",
                   sig, ::strsignal(sig), static_cast<int>(info.si_pid),
                   static_cast<unsigned>(info.si_uid));
      ::kill(child, sig);
      continue;
    }
    // SIGCHLDs coalesce: reap everything that is dead now. Exits that come later raise a new
    // SIGCHLD, pending until the next sigwaitinfo.
    for (;;) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;  // 0: the rest still run; -1 (ECHILD): none left
      // The namespace ends with its init: the kernel kills whatever is left in it.
      if (pid == child) ::_exit(ExitCodeOf(status));
    }
  }
}

}  // namespace

void BecomeInitIfPid1() {
  if (::getpid() != 1) return;
  // Blocked before the fork, so nothing sent in between is lost: a blocked signal is queued
  // even for an init, which drops the ones it neither handles nor blocks.
  sigset_t waited;
  sigset_t previous;
  sigemptyset(&waited);
  for (int sig : kForwarded) sigaddset(&waited, sig);
  sigaddset(&waited, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &waited, &previous);
  pid_t child = ::fork();
  if (child < 0) {
    std::fprintf(stderr,
                 "code-interpreter: as PID 1, fork for the init failed (%s); serving "
                 "without one: orphans are not reaped\n",
                 std::strerror(errno));
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    return;
  }
  if (child == 0) {
    // The daemon as anywhere else. No PR_SET_PDEATHSIG needed: when the init dies the kernel
    // kills every process of its PID namespace, this one included.
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    return;
  }
  Supervise(child, waited);
}

}  // namespace ci::daemon
