// Init runs the program: fork, exec, wait, then kill what is left. Init is PID 1, so
// kill(-1, SIGKILL) reaches every other process of the sandbox but not init itself. In a session
// with background programs, leftovers are found in /proc instead, sparing those programs' sessions.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/signal_state.h"
#include "runtime/init/caps.h"
#include "runtime/init/embedded_python.h"
#include "runtime/init/processes.h"
#include "runtime/init/sandbox_init.h"
#include "runtime/init/service_loop.h"
#include "runtime/init/userns.h"
#include "runtime/kernel/proc_file.h"
#include "runtime/wire/protocol.h"

extern char** environ;

namespace ci::runtime {
namespace {

std::vector<char*> CStrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Stdio of a background program: /dev/null, so it holds no pipe of any run open.
bool NullStdio() {
  int fd = ::open("/dev/null", O_RDWR);
  if (fd < 0) return false;
  for (int target = 0; target <= 2; ++target) {
    if (::dup2(fd, target) < 0) return false;
  }
  if (fd > 2) ::close(fd);
  return true;
}

// `fd3` >= 0 becomes the program's fd 3: the socket of a program serving calls
// (session_calls.h) or the ready pipe of a pre-started one (kPrestartReadyFd).
[[noreturn]] void ExecProgram(const proto::RunRequest& req, const ProgramUser& user, char** argv,
                              char** envp, int fd3, bool process) {
  // Not init's (SIGPIPE ignored), nor what a daemon under nohup or a script's `cmd &` ignores.
  ResetSignalState();
  if (req.background) {
    if (::setsid() < 0 || (!process && !NullStdio())) ::_exit(126);
  } else {
    ::setpgid(0, 0);
  }
  if ((!req.background || process) &&
      (::dup2(kProgramStdinFd, 0) < 0 || ::dup2(kProgramStdoutFd, 1) < 0 ||
       ::dup2(kProgramStderrFd, 2) < 0)) {
    ::_exit(126);
  }
  if (fd3 >= 0 && ::dup2(fd3, 3) != 3) ::_exit(126);
  ::close_range(fd3 >= 0 ? 4 : 3, ~0U, 0);
  if (user.switch_user) {
    SysError e = SwitchToSandboxUser(user.uid, user.gid);
    if (e.ok()) e = DropAllCapabilities();
    if (!e.ok()) {
      std::fprintf(stderr, "code-interpreter: %s: %s\n", e.what.c_str(), std::strerror(e.err));
      ::_exit(126);
    }
  }
  // Hard limit one second above the soft one: SIGXCPU first (catchable, reported as such), then
  // SIGKILL if the program ignores it. A background program (a session's interpreter) lives
  // across many calls: init bounds each call's CPU instead (session_calls.h).
  const rlim_t cpu_soft = req.cpu_time_sec + (req.prestart ? kPrestartCpuAllowanceSec : 0);
  struct rlimit cpu = {cpu_soft, cpu_soft + 1};
  struct rlimit core = {0, 0};
  if ((!req.background && ::setrlimit(RLIMIT_CPU, &cpu) != 0) ||
      ::setrlimit(RLIMIT_CORE, &core) != 0) {
    std::fprintf(stderr, "code-interpreter: setrlimit: %s\n", std::strerror(errno));
    ::_exit(126);
  }
  if (::chdir(req.cwd.c_str()) != 0) {
    std::fprintf(stderr, "code-interpreter: chdir %s: %s\n", req.cwd.c_str(), std::strerror(errno));
    ::_exit(126);
  }
  // Forked from the fork server's interpreter: run Python here instead of starting another.
  if (EmbeddedPythonRuns(argv, envp)) RunEmbeddedPython(argv);
  // execvp searches the PATH of the current environment, so install the program's first.
  environ = envp;
  ::execvp(argv[0], argv);
  std::fprintf(stderr, "code-interpreter: cannot execute %s: %s\n", argv[0], std::strerror(errno));
  ::_exit(127);
}

// The largest resident set among the children reaped since the run began (wait4's, of each
// child with its own reaped children): the run's, where RUSAGE_CHILDREN's would be the largest of
// every run this init served.
long g_run_max_rss_kb = 0;

// Reaps one child (waitpid's arguments) and notes its resident set; its pid, 0 or -1.
pid_t ReapChild(int* st, int options) {
  struct rusage ru {};
  pid_t w = ::wait4(-1, st, options, &ru);
  if (w > 0) g_run_max_rss_kb = std::max(g_run_max_rss_kb, ru.ru_maxrss);
  return w;
}

// Bookkeeping of one reaped child: the program's status, or a background program gone.
void Reaped(pid_t w, int st, pid_t program, int* status, bool* have_status,
            std::vector<pid_t>* background) {
  if (w == program && !*have_status) {
    *status = st;
    *have_status = true;
  }
  ChildReaped(w, st, background);
}

// Dead: a zombie whose threads have all ended. A thread-group leader that ended while its other
// threads run shows Z too, and a signal to it still reaches them.
bool Dead(long pid, char state) {
  if (state != 'Z' && state != 'X') return false;
  char status[4096];
  if (!ReadProcFile(pid, "status", status, sizeof status)) return true;  // reaped since
  const char* threads = std::strstr(status, "\nThreads:");
  return threads == nullptr || std::strtol(threads + 9, nullptr, 10) <= 1;
}

// The session id of a live process from /proc/<pid>/stat; -1 otherwise.
pid_t LiveSessionOf(long pid) {
  char buf[512];
  if (!ReadProcFile(pid, "stat", buf, sizeof buf)) return -1;
  // "pid (comm) state ppid pgrp session ...": comm may hold anything, so parse after its last ')'.
  const char* p = std::strrchr(buf, ')');
  char state = 0;
  int ppid = 0, pgrp = 0, session = 0;
  if (p == nullptr || std::sscanf(p + 1, " %c %d %d %d", &state, &ppid, &pgrp, &session) != 4) {
    return -1;
  }
  return Dead(pid, state) ? -1 : session;
}

// SIGKILLs every live process but init and the background sessions; true when there was one.
bool KillAllButBackground(const std::vector<pid_t>& background) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return false;
  bool found = false;
  while (struct dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 1) continue;
    pid_t sid = LiveSessionOf(pid);
    if (sid < 0 || std::find(background.begin(), background.end(), sid) != background.end()) {
      continue;
    }
    ::kill(static_cast<pid_t>(pid), SIGKILL);
    found = true;
  }
  ::closedir(proc);
  return found;
}

}  // namespace

void KillAndReapAll(pid_t program, int* status, bool* have_status, std::vector<pid_t>* background) {
  for (;;) {
    int st = 0;
    if (background->empty()) {
      ::kill(-1, SIGKILL);
      pid_t w = ReapChild(&st, 0);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return;  // ECHILD: the sandbox is empty
      Reaped(w, st, program, status, have_status, background);
      continue;
    }
    bool left = KillAllButBackground(*background);
    for (pid_t w; (w = ReapChild(&st, WNOHANG)) > 0;) {
      Reaped(w, st, program, status, have_status, background);
    }
    if (!left && (program <= 0 || *have_status)) return;
    ::usleep(1000);  // SIGKILL is asynchronous: let the victims die before looking again
  }
}

namespace {

std::string DescribeStatus(int status) {
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "exit status " + std::to_string(WEXITSTATUS(status));
}

// CPU time of the children reaped so far, in ms (cumulative: callers take differences).
uint64_t ChildrenCpuMs(struct rusage* ru) {
  ::getrusage(RUSAGE_CHILDREN, ru);
  return static_cast<uint64_t>(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000 +
         static_cast<uint64_t>(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1000;
}

// Waits for the started program `pid` or a kill request on fd 4, then kills and reaps the rest.
// `cpu_before`: init's reaped children's CPU before the program was forked.
proto::Exited AwaitProgram(pid_t pid, uint64_t cpu_before, int signal_fd,
                           std::vector<pid_t>* background, bool* daemon_gone) {
  proto::Exited out;
  int status = 0;
  bool have_status = false;
  g_run_max_rss_kb = 0;
  struct pollfd fds[2] = {{kServiceFd, POLLIN, 0}, {signal_fd, POLLIN, 0}};
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
      for (pid_t w; (w = ReapChild(&st, WNOHANG)) > 0;) {
        Reaped(w, st, pid, &status, &have_status, background);
      }
    }
    if (!have_status && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      proto::Msg type;
      int err = proto::ReadFrame(kServiceFd, &type, &payload);
      if (err != 0) {
        *daemon_gone = true;
        break;
      }
      if (type == proto::Msg::kKillProgram) {
        out.killed = true;
        break;
      }
    }
  }
  KillAndReapAll(pid, &status, &have_status, background);
  if (have_status && WIFEXITED(status)) {
    out.has_exit_code = true;
    out.exit_code = WEXITSTATUS(status);
  } else if (have_status && WIFSIGNALED(status)) {
    out.signal = WTERMSIG(status);
  }
  struct rusage ru {};
  out.cpu_ms = ChildrenCpuMs(&ru) - cpu_before;
  out.max_rss_kb = static_cast<uint64_t>(g_run_max_rss_kb);
  return out;
}

}  // namespace

pid_t ForkProgram(const proto::RunRequest& req, const ProgramUser& user, int fd3, bool process) {
  std::vector<char*> argv = CStrings(req.argv);
  std::vector<char*> envp = CStrings(req.env);
  // A program in a session of its own is spared by the next run's kill only once its setsid()
  // is done: init waits for the child to close its end of this pipe (ExecProgram's close_range,
  // after the setsid, or its exec or exit) before it says the program started.
  int setsid_done[2] = {-1, -1};
  if (req.background && ::pipe2(setsid_done, O_CLOEXEC) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) ExecProgram(req, user, argv.data(), envp.data(), fd3, process);
  ::close(kProgramStdinFd);
  ::close(kProgramStdoutFd);
  ::close(kProgramStderrFd);
  if (pid > 0 && !req.background) ::setpgid(pid, pid);  // both sides, whichever runs first
  if (req.background) {
    ::close(setsid_done[1]);
    char byte;
    for (ssize_t n = 1; pid > 0 && n != 0;) {
      n = ::read(setsid_done[0], &byte, 1);
      if (n < 0 && errno != EINTR) break;
    }
    ::close(setsid_done[0]);
  }
  return pid;
}

proto::Exited RunProgram(const proto::RunRequest& req, const ProgramUser& user, int signal_fd,
                         std::vector<pid_t>* background, bool* daemon_gone, int* call_socket) {
  struct rusage ru {};
  const uint64_t cpu_before = ChildrenCpuMs(&ru);
  // A program serving calls gets one end of a socket pair, init keeps the other: nothing else in
  // the sandbox can reach it (no name to connect to).
  int pair[2] = {-1, -1};
  if (req.background && req.serves_calls && call_socket != nullptr &&
      ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    pair[0] = pair[1] = -1;
  }
  pid_t pid = ForkProgram(req, user, pair[1]);
  if (pair[1] >= 0) ::close(pair[1]);
  if (call_socket != nullptr) *call_socket = pid > 0 ? pair[0] : -1;
  if (pid < 0 && pair[0] >= 0) ::close(pair[0]);
  if (pid < 0) {
    proto::Exited out;
    out.has_exit_code = true;
    out.exit_code = 126;
    return out;
  }
  if (req.background) background->push_back(pid);  // its pid is its session id (setsid)
  (void)proto::WriteFrame(kServiceFd, proto::Msg::kStarted, {});
  if (req.background) return {};
  return AwaitProgram(pid, cpu_before, signal_fd, background, daemon_gone);
}

Prestarted PrestartProgram(const proto::RunRequest& req, const ProgramUser& user,
                           std::string* error) {
  Prestarted out;
  struct rusage ru {};
  out.children_cpu_ms = ChildrenCpuMs(&ru);
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    *error = std::string("pipe2: ") + std::strerror(errno);
    return out;
  }
  pid_t pid = ForkProgram(req, user, ready[1]);
  ::close(ready[1]);
  if (pid < 0) {
    ::close(ready[0]);
    *error = std::string("fork: ") + std::strerror(errno);
    return out;
  }
  // Ready: a byte on the pipe. Its end closed without one: the program ended (or is ending).
  struct pollfd p = {ready[0], POLLIN, 0};
  int n;
  while ((n = ::poll(&p, 1, kPrestartReadyTimeoutSec * 1000)) < 0 && errno == EINTR) {
  }
  char byte;
  const bool said_ready = n > 0 && ::read(ready[0], &byte, 1) == 1;
  ::close(ready[0]);
  if (said_ready) {
    out.pid = pid;
    return out;
  }
  int status = 0;
  for (int waited_ms = 0; n > 0 && waited_ms < 1000; waited_ms += 10) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      *error = "it ended before it was ready (" + DescribeStatus(status) + ")";
      return out;
    }
    ::usleep(10000);
  }
  *error = n == 0 ? "it was not ready within " + std::to_string(kPrestartReadyTimeoutSec) + " s"
                  : std::string("it closed fd 3 without saying it was ready");
  ::kill(-pid, SIGKILL);  // its process group; the sandbox is torn down for the error
  return out;
}

std::optional<proto::Exited> ResumeProgram(const Prestarted& program, int signal_fd,
                                           std::vector<pid_t>* background, bool* daemon_gone) {
  int status = 0;
  pid_t w = program.pid > 0 ? ::waitpid(program.pid, &status, WNOHANG) : -1;
  if (w != 0) {
    std::string why = "the pre-started program ended before its run";
    if (w > 0) why += " (" + DescribeStatus(status) + ")";
    (void)proto::WriteFrame(kServiceFd, proto::Msg::kPrestartEnded, proto::EncodeError(why));
    return std::nullopt;
  }
  const uint64_t before_run_ms = ProcessCpuMs(program.pid);
  (void)proto::WriteFrame(kServiceFd, proto::Msg::kStarted,
                          proto::Encode(proto::Started{before_run_ms}));
  proto::Exited out =
      AwaitProgram(program.pid, program.children_cpu_ms, signal_fd, background, daemon_gone);
  out.cpu_ms = out.cpu_ms > before_run_ms ? out.cpu_ms - before_run_ms : 0;
  return out;
}

}  // namespace ci::runtime
