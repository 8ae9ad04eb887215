#include "agent/exec_agent.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>

#include "agent/agent_wire.h"
#include "agent/recycle.h"
#include "agent/session_kill.h"

extern char** environ;

namespace ci::agent {
namespace {

constexpr size_t kChunk = 64u << 10;

// One exec: its process and the agent's ends of its stdio.
struct Exec {
  pid_t pid = 0;
  int in = -1;  // write end of the program's stdin (attach_stdin only)
  std::string pending_in;
  bool close_in_when_drained = false;
  int out = -1;
  int err = -1;
  bool reaped = false;
  int status = 0;
};

void CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

int StatusOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 255;
}

// The exec's environment: the agent's (the container's Env) with the request's on top.
std::vector<std::string> MergedEnv(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  for (const std::string& kv : extra) {
    const std::string key = kv.substr(0, kv.find('=') + 1);
    std::erase_if(env, [&](const std::string& x) { return x.rfind(key, 0) == 0; });
    env.push_back(kv);
  }
  return env;
}

class Agent {
 public:
  explicit Agent(const AgentOptions& o) : o_(o) {}

  int Serve() {
    // The program runs as the agent's user: without this it could ptrace the agent or open its
    // /proc/1/fd (the daemon's stream) and /proc/1/mem, and so outlive its execution.
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    ::signal(SIGPIPE, SIG_IGN);  // a program that closed its stdin: EPIPE, handled
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &chld, nullptr);
    sig_fd_ = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    std::string error;
    roots_ = RecordRoots(o_.wipe, &error);
    if (sig_fd_ < 0 || !error.empty()) {
      std::fprintf(stderr, "agent: %s\n", sig_fd_ < 0 ? std::strerror(errno) : error.c_str());
      return 1;
    }
    ::fcntl(o_.in_fd, F_SETFL, ::fcntl(o_.in_fd, F_GETFL) | O_NONBLOCK);
    if (!Send(Msg::kReady, WithId(kWireVersion))) return 1;
    for (;;) {
      std::vector<pollfd> fds = {{o_.in_fd, POLLIN, 0}, {sig_fd_, POLLIN, 0}};
      for (auto& [id, e] : execs_) {
        if (e.out >= 0) fds.push_back({e.out, POLLIN, 0});
        if (e.err >= 0) fds.push_back({e.err, POLLIN, 0});
        if (e.in >= 0 && !e.pending_in.empty()) fds.push_back({e.in, POLLOUT, 0});
      }
      int n = ::poll(fds.data(), fds.size(), TimeoutMs());
      if (n < 0 && errno != EINTR) return Quit(1);
      if (o_.expires_at != 0 && ::time(nullptr) >= o_.expires_at) return Quit(0);
      if (n <= 0) continue;
      if (fds[1].revents != 0) Reap();
      for (size_t i = 2; i < fds.size(); ++i) {
        if (fds[i].revents != 0) Serve(fds[i]);
      }
      if (fds[0].revents != 0 && !ReadDaemon()) return Quit(0);
      if (!FinishExecs()) return Quit(1);
    }
  }

 private:
  int TimeoutMs() const {
    if (o_.expires_at == 0) return -1;
    int64_t left = o_.expires_at - static_cast<int64_t>(::time(nullptr));
    return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 3600) * 1000);
  }

  bool Send(Msg type, std::string_view payload) {
    std::string frame = Frame(type, payload);
    std::string_view rest = frame;
    while (!rest.empty()) {
      ssize_t n = ::write(o_.out_fd, rest.data(), rest.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      rest.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // The daemon's frames; false when its stream ended or broke.
  bool ReadDaemon() {
    char buf[kChunk];
    for (;;) {
      ssize_t n = ::read(o_.in_fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n <= 0) return false;
      reader_.Feed(std::string_view(buf, static_cast<size_t>(n)));
    }
    Msg type;
    std::string payload;
    bool bad = false;
    while (reader_.Next(&type, &payload, &bad)) {
      if (!Handle(type, payload)) return false;
    }
    return !bad;
  }

  bool Handle(Msg type, const std::string& payload) {
    switch (type) {
      case Msg::kExec: {
        std::optional<ExecRequest> req = DecodeExec(payload);
        return req && Start(*req);
      }
      case Msg::kStdin:
      case Msg::kStdinEnd: {
        auto split = SplitId(payload);
        if (!split) return false;
        auto it = execs_.find(split->first);
        if (it == execs_.end() || it->second.in < 0) return true;  // it ended already
        Exec& e = it->second;
        if (type == Msg::kStdin) e.pending_in.append(split->second);
        if (type == Msg::kStdinEnd) e.close_in_when_drained = true;
        WriteStdin(e);
        return true;
      }
      case Msg::kKillAll:
        if (payload.empty()) {
          ::kill(-1, SIGKILL);
        } else {
          KillAllButSessions(ParseSessionList(payload));
        }
        return true;
      case Msg::kRecycle:
        return Recycle();
      default:
        return false;  // not the daemon speaking
    }
  }

  bool Start(const ExecRequest& req) {
    if (execs_.count(req.id) != 0) return false;
    int in[2] = {-1, -1}, out[2], err[2];
    if ((req.attach_stdin ? ::pipe2(in, O_CLOEXEC) : 0) != 0 || ::pipe2(out, O_CLOEXEC) != 0 ||
        ::pipe2(err, O_CLOEXEC) != 0) {
      return Fail(req.id, std::string("pipe: ") + std::strerror(errno));
    }
    std::vector<std::string> env = MergedEnv(req.env);
    std::vector<char*> argv, envp;
    for (const auto& a : req.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& kv : env) envp.push_back(const_cast<char*>(kv.c_str()));
    envp.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::signal(SIGPIPE, SIG_DFL);
      int stdin_fd = req.attach_stdin ? in[0] : ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (::dup2(stdin_fd, 0) < 0 || ::dup2(out[1], 1) < 0 || ::dup2(err[1], 2) < 0) _exit(126);
      if (!req.cwd.empty() && ::chdir(req.cwd.c_str()) != 0) {
        std::fprintf(stderr, "exec: chdir %s: %s\n", req.cwd.c_str(), std::strerror(errno));
        _exit(126);
      }
      ::execvpe(argv[0], argv.data(), envp.data());
      int e = errno;
      std::fprintf(stderr, "exec: %s: %s\n", argv[0], std::strerror(e));
      _exit(e == ENOENT ? 127 : 126);
    }
    ::close(out[1]);
    ::close(err[1]);
    if (req.attach_stdin) ::close(in[0]);
    if (pid < 0) {
      ::close(out[0]);
      ::close(err[0]);
      if (req.attach_stdin) ::close(in[1]);
      return Fail(req.id, std::string("fork: ") + std::strerror(errno));
    }
    Exec& e = execs_[req.id];
    e.pid = pid;
    e.in = req.attach_stdin ? in[1] : -1;
    e.out = out[0];
    e.err = err[0];
    for (int fd : {e.in, e.out, e.err}) {
      if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    by_pid_[pid] = req.id;
    return Send(Msg::kStarted, WithId(req.id));
  }

  // An exec that could not start, as a `docker exec` whose start failed: the daemon may make
  // room and try again (a fork bomb filling the pids limit). False when its stream broke.
  bool Fail(uint32_t id, const std::string& why) { return Send(Msg::kNotStarted, WithId(id, why)); }

  void WriteStdin(Exec& e) {
    while (e.in >= 0 && !e.pending_in.empty()) {
      ssize_t n = ::write(e.in, e.pending_in.data(), e.pending_in.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      if (n < 0) {  // EPIPE: the program stopped reading; the rest is dropped
        e.pending_in.clear();
        CloseFd(&e.in);
        return;
      }
      e.pending_in.erase(0, static_cast<size_t>(n));
    }
    if (e.close_in_when_drained) CloseFd(&e.in);
  }

  void Serve(const pollfd& p) {
    for (auto& [id, e] : execs_) {
      if (p.fd == e.in) return WriteStdin(e);
      if (p.fd == e.out || p.fd == e.err) return Relay(id, p.fd == e.out ? &e.out : &e.err);
    }
  }

  // One read of a program's output into one frame; EOF closes the agent's end.
  void Relay(uint32_t id, int* fd) {
    char buf[kChunk];
    ssize_t n = ::read(*fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) return CloseFd(fd);
    const int stream = fd == &execs_[id].out ? 1 : 2;
    Send(Msg::kOutput, EncodeOutput(id, stream, std::string_view(buf, static_cast<size_t>(n))));
  }

  // As init, the agent reaps every process of the container: an exec's own status is kept, the
  // orphans it left are only collected.
  void Reap() {
    signalfd_siginfo info;
    while (::read(sig_fd_, &info, sizeof info) > 0) {
    }
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      auto it = by_pid_.find(pid);
      if (it == by_pid_.end()) continue;
      Exec& e = execs_[it->second];
      e.reaped = true;
      e.status = StatusOf(status);
      by_pid_.erase(it);
    }
  }

  // An exec is over when its process was reaped and its output ended (whatever it left behind
  // holding stdout keeps it open, as with `docker exec`).
  bool FinishExecs() {
    for (auto it = execs_.begin(); it != execs_.end();) {
      Exec& e = it->second;
      if (!e.reaped || e.out >= 0 || e.err >= 0) {
        ++it;
        continue;
      }
      CloseFd(&e.in);
      if (!Send(Msg::kExited, EncodeExited(it->first, e.status))) return false;
      it = execs_.erase(it);
    }
    return true;
  }

  bool Recycle() {
    std::string error;
    std::vector<std::string> uncovered = UncoveredWritableMounts(roots_);
    if (!uncovered.empty()) error = "writable mount not wiped between executions: " + uncovered[0];
    if (error.empty()) KillAndReapEverything(&error);
    for (auto& [id, e] : execs_) {
      for (int* fd : {&e.in, &e.out, &e.err}) CloseFd(fd);
    }
    execs_.clear();
    by_pid_.clear();
    if (error.empty()) WipeRoots(roots_, &error);
    if (error.empty()) RemoveSysvIpc(&error);
    std::string answer(1, error.empty() ? 1 : 0);
    return Send(Msg::kRecycled, answer + error);
  }

  int Quit(int code) {
    ::kill(-1, SIGKILL);
    return code;
  }

  const AgentOptions& o_;
  int sig_fd_ = -1;
  std::vector<WipeRoot> roots_;
  FrameReader reader_;
  std::map<uint32_t, Exec> execs_;
  std::map<pid_t, uint32_t> by_pid_;
};

}  // namespace

int RunExecAgent(const AgentOptions& options) { return Agent(options).Serve(); }

}  // namespace ci::agent
