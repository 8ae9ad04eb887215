#include "runtime/init/session_calls.h"

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

#include "runtime/init/processes.h"
#include "runtime/init/sandbox_init.h"
#include "runtime/init/service_loop.h"
#include "runtime/kernel/proc_file.h"
#include "runtime/wire/fd_passing.h"
#include "runtime/wire/protocol.h"

namespace ci::runtime {
namespace {

constexpr int kCallPollMs = 100;  // how often a call's CPU is looked at
constexpr int kIdlePollMs = 250;  // and the sandbox's between runs

bool Serving(const SessionInterpreter& s, const std::vector<pid_t>& background) {
  return s.pid > 0 && std::find(background.begin(), background.end(), s.pid) != background.end();
}

// Forgets the server; with `kill`, first kills it and everything else but init (its subprocesses
// and threads too) and records its status.
void EndServer(SessionInterpreter* s, std::vector<pid_t>* background, bool kill, int* status,
               bool* have_status) {
  if (kill) {
    bool listed = Serving(*s, *background);
    background->erase(std::remove(background->begin(), background->end(), s->pid),
                      background->end());
    KillAndReapAll(listed ? s->pid : -1, status, have_status, background);
  }
  if (s->fd >= 0) ::close(s->fd);
  s->fd = -1;
  s->pid = 0;
}

void KillServer(SessionInterpreter* s, std::vector<pid_t>* background) {
  int status = 0;
  bool have = false;
  EndServer(s, background, true, &status, &have);
}

bool SendCall(int fd, const std::string& call) {
  std::string frame(4, '\0');
  const auto size = static_cast<uint32_t>(call.size());
  for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>((size >> (8 * i)) & 0xff);
  frame += call;
  return SendWithFds(fd, frame, {kProgramStdinFd, kProgramStdoutFd, kProgramStderrFd}) == 0;
}

// The server's peak resident set (VmHWM of /proc/<pid>/status), in KiB; 0 when unreadable.
uint64_t PeakRssKb(pid_t pid) {
  char buf[4096];
  if (!ReadProcFile(pid, "status", buf, sizeof buf)) return 0;
  const char* at = std::strstr(buf, "VmHWM:");
  return at == nullptr ? 0 : std::strtoull(at + 6, nullptr, 10);
}

void StatusInto(int status, bool have_status, proto::Exited* out) {
  if (have_status && WIFEXITED(status)) {
    out->has_exit_code = true;
    out->exit_code = WEXITSTATUS(status);
  } else if (have_status && WIFSIGNALED(status)) {
    out->signal = WTERMSIG(status);
  }
}

uint64_t Since(uint64_t start) {
  uint64_t now = SandboxCpuMs();
  return now > start ? now - start : 0;
}

}  // namespace

uint64_t SandboxCpuMs() {
  static uint64_t last = 0;
  static const long hz = ::sysconf(_SC_CLK_TCK);
  uint64_t ticks = 0;
  if (DIR* proc = ::opendir("/proc")) {
    while (struct dirent* e = ::readdir(proc)) {
      char* end = nullptr;
      long pid = std::strtol(e->d_name, &end, 10);
      if (*end != '\0' || pid <= 1) continue;
      ticks += ProcessTicks(pid);
    }
    ::closedir(proc);
  }
  struct rusage ru {};
  ::getrusage(RUSAGE_CHILDREN, &ru);
  uint64_t ms = ticks * 1000 / static_cast<uint64_t>(hz > 0 ? hz : 100) +
                static_cast<uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
                static_cast<uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
  last = std::max(last, ms);
  return last;
}

void SessionInterpreterStarted(SessionInterpreter* server, const std::vector<pid_t>& background,
                               int fd, uint32_t cpu_limit_sec) {
  if (server->fd >= 0) ::close(server->fd);
  server->fd = fd;
  server->pid = fd >= 0 && !background.empty() ? background.back() : 0;
  server->cpu_limit_sec = cpu_limit_sec;
  server->window_start_ms = SandboxCpuMs();
  server->idle_ms = 0;
}

void RunEnded(SessionInterpreter* server, bool was_call, uint64_t run_cpu_ms) {
  if (was_call) {
    server->window_start_ms = SandboxCpuMs();
  } else {
    server->window_start_ms += run_cpu_ms;
  }
}

void AwaitDaemonWatchingCpu(SessionInterpreter* server, std::vector<pid_t>* background) {
  for (;;) {
    if (!Serving(*server, *background) || server->cpu_limit_sec == 0) return;
    if (server->idle_ms + Since(server->window_start_ms) > uint64_t{server->cpu_limit_sec} * 1000) {
      KillServer(server, background);
      return;
    }
    ReapEnded(background);  // a process (kSpawn) that ended is told within the poll's period
    struct pollfd p = {kServiceFd, POLLIN, 0};
    if (::poll(&p, 1, kIdlePollMs) != 0) return;  // a frame, EOF, or an error for ReadFrame
  }
}

proto::Exited ServeCall(const proto::RunRequest& req, int signal_fd, SessionInterpreter* server,
                        std::vector<pid_t>* background, bool* daemon_gone) {
  proto::Exited out;
  const uint64_t limit_ms = uint64_t{req.cpu_time_sec} * 1000;
  ReapEnded(background);  // a server that died since the last run is seen as gone
  bool serving = Serving(*server, *background);
  if (!serving) EndServer(server, background, false, nullptr, nullptr);  // gone: forget its fd
  server->idle_ms += Since(server->window_start_ms);
  if (serving && limit_ms > 0 && server->idle_ms > limit_ms) {  // burnt it while no call ran
    KillServer(server, background);
    serving = false;
  }
  const bool sent = serving && SendCall(server->fd, req.call);
  // The server has the call's stdio now; init keeps no copy (EOF once the call's writers end).
  ::close(kProgramStdinFd);
  ::close(kProgramStdoutFd);
  ::close(kProgramStderrFd);
  (void)proto::WriteFrame(kServiceFd, proto::Msg::kStarted, {});
  if (!sent) {
    if (serving) KillServer(server, background);
    out.no_server = true;
    return out;
  }
  const uint64_t start = SandboxCpuMs();
  int status = 0;
  bool have_status = false;
  unsigned char answer[5];
  size_t got = 0;
  std::string payload;
  for (;;) {
    out.cpu_ms = Since(start);
    out.max_rss_kb = std::max(out.max_rss_kb, PeakRssKb(server->pid));
    if (limit_ms > 0 && out.cpu_ms >= limit_ms) {  // reported as a SIGKILL past the CPU limit
      EndServer(server, background, true, &status, &have_status);
      out.signal = SIGKILL;
      return out;
    }
    struct pollfd fds[3] = {
        {kServiceFd, POLLIN, 0}, {signal_fd, POLLIN, 0}, {server->fd, POLLIN, 0}};
    int ready = ::poll(fds, 3, kCallPollMs);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    if (fds[1].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (::read(signal_fd, &si, sizeof si) == sizeof si) {
      }
      int st = 0;
      for (pid_t w; (w = ::waitpid(-1, &st, WNOHANG)) > 0;) {
        ChildReaped(w, st, background);
        if (w != server->pid) continue;
        status = st;
        have_status = true;
      }
      if (have_status) {  // the server died during the call (an OOM kill, os._exit, a signal)
        EndServer(server, background, true, &status, &have_status);
        StatusInto(status, have_status, &out);
        out.cpu_ms = Since(start);
        return out;
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      proto::Msg type;
      int err = proto::ReadFrame(kServiceFd, &type, &payload);
      if (err != 0) *daemon_gone = true;
      if (err != 0 || type == proto::Msg::kKillProgram) {  // past the call's timeout
        EndServer(server, background, true, &status, &have_status);
        out.killed = true;
        out.cpu_ms = Since(start);
        return out;
      }
    }
    if (fds[2].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = ::recv(server->fd, answer + got, sizeof answer - got, MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {  // it closed its socket: it is exiting (or broke it); nothing it says counts
        EndServer(server, background, true, &status, &have_status);
        StatusInto(status, have_status, &out);
        out.cpu_ms = Since(start);
        return out;
      }
      got += static_cast<size_t>(n);
      if (got < sizeof answer) continue;
      uint32_t code = 0;
      for (int i = 0; i < 4; ++i) code |= static_cast<uint32_t>(answer[i]) << (8 * i);
      out.has_exit_code = true;
      out.exit_code = static_cast<int>(code & 0xff);
      out.killed = (answer[4] & 1) != 0;  // interrupted at its timeout: timed out, state kept
      out.cpu_ms = Since(start);
      return out;
    }
  }
  EndServer(server, background, true, &status, &have_status);
  out.killed = true;
  return out;
}

}  // namespace ci::runtime
