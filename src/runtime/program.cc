// Init runs the program: fork, exec, wait, then kill what is left. Init is PID 1, so
// kill(-1, SIGKILL) reaches every other process of the sandbox but not init itself.
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime/agent.h"
#include "runtime/protocol.h"
#include "runtime/sandbox_init.h"

extern char** environ;

namespace ci {
namespace {

std::vector<char*> CStrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

[[noreturn]] void ExecProgram(const proto::RunRequest& req, char** argv, char** envp) {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::setpgid(0, 0);
  if (::dup2(kProgramStdinFd, 0) < 0 || ::dup2(kProgramStdoutFd, 1) < 0 ||
      ::dup2(kProgramStderrFd, 2) < 0) {
    ::_exit(126);
  }
  ::close_range(3, ~0U, 0);
  // Hard limit one second above the soft one: SIGXCPU first (catchable, reported as such), then
  // SIGKILL if the program ignores it.
  struct rlimit cpu = {req.cpu_time_sec, static_cast<rlim_t>(req.cpu_time_sec) + 1};
  struct rlimit core = {0, 0};
  if (::setrlimit(RLIMIT_CPU, &cpu) != 0 || ::setrlimit(RLIMIT_CORE, &core) != 0) {
    std::fprintf(stderr, "code-interpreter: setrlimit: %s\n", std::strerror(errno));
    ::_exit(126);
  }
  if (::chdir(req.cwd.c_str()) != 0) {
    std::fprintf(stderr, "code-interpreter: chdir %s: %s\n", req.cwd.c_str(), std::strerror(errno));
    ::_exit(126);
  }
  // execvp searches the PATH of the current environment, so install the program's first.
  environ = envp;
  ::execvp(argv[0], argv);
  std::fprintf(stderr, "code-interpreter: cannot execute %s: %s\n", argv[0], std::strerror(errno));
  ::_exit(127);
}

// SIGKILLs everything but init until no child is left; records the program's status on the way.
void KillAndReapAll(pid_t program, int* status, bool* have_status) {
  for (;;) {
    ::kill(-1, SIGKILL);
    int st = 0;
    pid_t w = ::waitpid(-1, &st, 0);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return;  // ECHILD: the sandbox is empty
    if (w == program && !*have_status) {
      *status = st;
      *have_status = true;
    }
  }
}

}  // namespace

proto::Exited RunProgram(const proto::RunRequest& req, int signal_fd, bool* agent_gone) {
  proto::Exited out;
  std::vector<char*> argv = CStrings(req.argv);
  std::vector<char*> envp = CStrings(req.env);
  pid_t pid = ::fork();
  if (pid == 0) ExecProgram(req, argv.data(), envp.data());
  // Init keeps no copy of the program's stdio: the daemon sees EOF once the program's tree is gone.
  ::close(kProgramStdinFd);
  ::close(kProgramStdoutFd);
  ::close(kProgramStderrFd);
  int status = 0;
  bool have_status = false;
  if (pid < 0) {
    out.has_exit_code = true;
    out.exit_code = 126;
    return out;
  }
  ::setpgid(pid, pid);  // both sides, whichever runs first
  (void)proto::WriteFrame(kAgentFd, proto::Msg::kStarted, {});

  struct pollfd fds[2] = {{kAgentFd, POLLIN, 0}, {signal_fd, POLLIN, 0}};
  std::string payload;
  while (!have_status) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (::read(signal_fd, &si, sizeof si) == sizeof si) {
      }
      int st = 0;
      for (pid_t w; (w = ::waitpid(-1, &st, WNOHANG)) > 0;) {
        if (w == pid) status = st, have_status = true;
      }
    }
    if (!have_status && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      proto::Msg type;
      int err = proto::ReadFrame(kAgentFd, &type, &payload);
      if (err != 0) {
        *agent_gone = true;
        break;
      }
      if (type == proto::Msg::kKillProgram) {
        out.killed = true;
        break;
      }
    }
  }
  KillAndReapAll(pid, &status, &have_status);
  if (have_status && WIFEXITED(status)) {
    out.has_exit_code = true;
    out.exit_code = WEXITSTATUS(status);
  } else if (have_status && WIFSIGNALED(status)) {
    out.signal = WTERMSIG(status);
  }
  struct rusage ru {};
  ::getrusage(RUSAGE_CHILDREN, &ru);
  out.cpu_ms = static_cast<uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
               static_cast<uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
  out.max_rss_kb = static_cast<uint64_t>(ru.ru_maxrss);
  return out;
}

}  // namespace ci
