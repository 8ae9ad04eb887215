#include "agent/exec_agent.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <optional>

#include "agent/agent_wire.h"
#include "agent/child.h"
#include "agent/counter_files.h"
#include "agent/egress_relay.h"
#include "agent/list_dir.h"
#include "agent/process_attributes.h"
#include "agent/python_fork_server.h"
#include "agent/recycle.h"
#include "agent/session_kill.h"
#include "agent/write_files.h"
#include "core/signal_state.h"

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
  bool zygote = false;  // forked by the fork server: pid 0 until it reports the pid
  std::chrono::steady_clock::time_point asked;  // when the fork server was asked
  uint64_t unacked = 0;                         // output sent, not yet acknowledged (kOutputWindow)
  bool unbounded = false;  // kOutputAckAll: its output is no longer held to the window
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
    own_attributes_ = ProcessAttributes(::getpid());
    if (sig_fd_ < 0 || !error.empty()) {
      std::fprintf(stderr, "agent: %s\n", sig_fd_ < 0 ? std::strerror(errno) : error.c_str());
      return 1;
    }
    ::fcntl(o_.in_fd, F_SETFL, ::fcntl(o_.in_fd, F_GETFL) | O_NONBLOCK);
    if (!Send(Msg::kReady, WithId(kWireVersion))) return 1;
    for (;;) {
      std::vector<pollfd> fds = {
          {o_.in_fd, POLLIN, 0}, {sig_fd_, POLLIN, 0}, {zygote_.fd(), POLLIN, 0}};
      for (auto& [id, e] : execs_) {
        // A full window: the program's output waits in its pipes, and then the program.
        const bool room = !windowed_ || e.unbounded || e.unacked < kOutputWindow;
        if (e.out >= 0 && room) fds.push_back({e.out, POLLIN, 0});
        if (e.err >= 0 && room) fds.push_back({e.err, POLLIN, 0});
        if (e.in >= 0 && !e.pending_in.empty()) fds.push_back({e.in, POLLOUT, 0});
      }
      egress_.AddPollFds(&fds);
      int n = ::poll(fds.data(), fds.size(), TimeoutMs());
      if (n < 0 && errno != EINTR) return Quit(1);
      if (o_.expires_at != 0 && ::time(nullptr) >= o_.expires_at) return Quit(0);
      if (!FailForksTooLongUnanswered()) return Quit(1);
      if (n <= 0) continue;
      // The fork server's pid reports before the reaping: a program it forked may be gone
      // already, and its exit status must find its exec.
      if (fds[2].revents != 0 && !ReadZygote()) return Quit(1);
      if (fds[1].revents != 0 && !Reap()) return Quit(1);
      for (size_t i = 3; i < fds.size(); ++i) {
        if (fds[i].revents != 0 && !egress_.Serve(fds[i])) Serve(fds[i]);
      }
      if (fds[0].revents != 0 && !ReadDaemon()) return Quit(0);
      if (!FinishExecs()) return Quit(1);
    }
  }

 private:
  // Until the expiry or the oldest unanswered fork's deadline, whichever comes first (-1: none).
  int TimeoutMs() const {
    int64_t ms = -1;
    if (o_.expires_at != 0) {
      int64_t left = o_.expires_at - static_cast<int64_t>(::time(nullptr));
      ms = left <= 0 ? 0 : std::min<int64_t>(left, 3600) * 1000;
    }
    const auto now = std::chrono::steady_clock::now();
    for (const auto& [id, e] : execs_) {
      if (!e.zygote || e.pid != 0) continue;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            e.asked + std::chrono::milliseconds(o_.fork_timeout_ms) - now)
                            .count();
      ms = ms < 0 ? std::max<int64_t>(left, 0) : std::clamp<int64_t>(left, 0, ms);
    }
    return static_cast<int>(ms);
  }

  // A fork the server did not report in time: it is killed (reaped as any process, started again
  // by the next recycle) and what it had not forked fails, for the daemon to exec instead.
  bool FailForksTooLongUnanswered() {
    const auto now = std::chrono::steady_clock::now();
    const bool late = std::any_of(execs_.begin(), execs_.end(), [&](const auto& kv) {
      return kv.second.zygote && kv.second.pid == 0 &&
             now - kv.second.asked >= std::chrono::milliseconds(o_.fork_timeout_ms);
    });
    if (!late || !zygote_.running()) return true;
    zygote_.Kill();
    return FailUnforked("the fork server did not answer within " +
                        std::to_string(o_.fork_timeout_ms) + " ms");
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
        return req && (req->from_zygote ? StartFromZygote(*req) : Start(*req));
      }
      case Msg::kZygote: {
        zygote_request_ = DecodeExec(payload);
        if (!zygote_request_) return false;
        StartZygote();
        return true;
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
      case Msg::kWriteFiles: {
        std::optional<WriteFilesRequest> req = DecodeWriteFiles(payload);
        return req && Send(Msg::kFilesWritten, WithId(req->id, WriteFiles(req->dir, req->files)));
      }
      case Msg::kReadCounters: {
        auto split = SplitId(payload);
        if (!split || split->second.size() != 1) return false;
        const auto extras = static_cast<uint8_t>(split->second[0]);
        return Send(Msg::kCountersRead, WithId(split->first, ReadCounterFiles(extras)));
      }
      case Msg::kListDir: {
        auto split = SplitId(payload);
        return split &&
               Send(Msg::kDirListed,
                    EncodeDirListed(ListDir(split->first, std::string(split->second), kMaxListed)));
      }
      case Msg::kHello:
        if (auto daemon = SplitId(payload)) windowed_ = daemon->first >= kWindowedWireVersion;
        return Send(Msg::kReady, WithId(kWireVersion));
      case Msg::kOutputAck: {
        auto ack = DecodeAck(payload);
        if (!ack) return false;
        auto it = execs_.find(ack->first);
        if (it == execs_.end()) return true;  // it ended already
        Exec& e = it->second;
        if (ack->second == kOutputAckAll) e.unbounded = true;
        e.unacked -= std::min<uint64_t>(e.unacked, ack->second);
        return true;
      }
      case Msg::kEgressListen: {
        auto port = SplitId(payload);
        return port && port->second.empty() &&
               Send(Msg::kEgressListening, egress_.Listen(port->first));
      }
      case Msg::kEgressStop:
        egress_.Stop();
        return true;
      case Msg::kEgressData:
      case Msg::kEgressAck:
      case Msg::kEgressEnd:
      case Msg::kEgressClose:
        return egress_.Handle(type, payload);
      default:
        return false;  // not the daemon speaking
    }
  }

  bool Start(const ExecRequest& req) {
    if (execs_.count(req.id) != 0) return false;
    int in[2] = {-1, -1}, out[2], err[2];
    if (!OpenPipes(req.attach_stdin, in, out, err)) {
      return Fail(req.id, std::string("pipe: ") + std::strerror(errno));
    }
    std::vector<std::string> env = MergedEnv(req.env);
    ExecVectors v = VectorsOf(req.argv, env);
    pid_t pid = ::fork();
    if (pid == 0) {
      ResetSignalState();  // not the agent's (SIGPIPE ignored, SIGCHLD blocked)
      // A session (and process group) of its own, as a `docker exec`'s process leads (runc): the
      // sandbox shell's kills spare sessions by id, and a signal to a process goes to its group.
      ::setsid();
      int stdin_fd = req.attach_stdin ? in[0] : ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (::dup2(stdin_fd, 0) < 0 || ::dup2(out[1], 1) < 0 || ::dup2(err[1], 2) < 0) _exit(126);
      if (!req.cwd.empty() && ::chdir(req.cwd.c_str()) != 0) {
        std::fprintf(stderr, "exec: chdir %s: %s\n", req.cwd.c_str(), std::strerror(errno));
        _exit(126);
      }
      ::execvpe(v.argv[0], v.argv.data(), v.envp.data());
      int e = errno;
      std::fprintf(stderr, "exec: %s: %s\n", v.argv[0], std::strerror(e));
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
    Exec& e = AddExec(req.id, req.attach_stdin ? in[1] : -1, out[0], err[0]);
    e.pid = pid;
    by_pid_[pid] = req.id;
    return Send(Msg::kStarted, WithId(req.id));
  }

  static bool OpenPipes(bool attach_stdin, int in[2], int out[2], int err[2]) {
    if (attach_stdin && ::pipe2(in, O_CLOEXEC) != 0) return false;
    if (::pipe2(out, O_CLOEXEC) == 0) {
      if (::pipe2(err, O_CLOEXEC) == 0) return true;
      ::close(out[0]);
      ::close(out[1]);
    }
    if (attach_stdin) ::close(in[0]), ::close(in[1]);
    return false;
  }

  Exec& AddExec(uint32_t id, int in, int out, int err) {
    Exec& e = execs_[id];
    e.in = in;
    e.out = out;
    e.err = err;
    for (int fd : {e.in, e.out, e.err}) {
      if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    return e;
  }

  static void CloseExec(Exec& e) {
    for (int* fd : {&e.in, &e.out, &e.err}) CloseFd(fd);
  }

  void StartZygote() {
    std::string why;
    if (!zygote_.Start(*zygote_request_, MergedEnv(zygote_request_->env), &why)) {
      std::fprintf(stderr, "agent: the fork server did not start: %s\n", why.c_str());
    }
  }

  // An exec whose program the fork server forks: kStarted once it reports the program's pid.
  bool StartFromZygote(const ExecRequest& req) {
    if (execs_.count(req.id) != 0) return false;
    if (!zygote_.running()) return Fail(req.id, "no fork server");
    int in[2] = {-1, -1}, out[2], err[2];
    if (!OpenPipes(req.attach_stdin, in, out, err)) {
      return Fail(req.id, std::string("pipe: ") + std::strerror(errno));
    }
    const int stdin_fd = req.attach_stdin ? in[0] : ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    const int stdio[3] = {stdin_fd, out[1], err[1]};
    std::string why;
    const bool sent = stdin_fd >= 0 && zygote_.Fork(req.id, req, MergedEnv(req.env), stdio, &why);
    for (int fd : stdio) {
      if (fd >= 0) ::close(fd);
    }
    Exec& e = AddExec(req.id, req.attach_stdin ? in[1] : -1, out[0], err[0]);
    e.zygote = true;
    e.asked = std::chrono::steady_clock::now();
    if (sent) return true;
    CloseExec(e);
    execs_.erase(req.id);
    return Fail(req.id, why.empty() ? "no /dev/null" : why);
  }

  // The fork server's reports; false when the daemon's stream broke.
  bool ReadZygote() {
    std::vector<Zygote::Report> reports;
    const bool open = zygote_.Read(&reports);
    for (const Zygote::Report& r : reports) {
      auto it = execs_.find(r.id);
      if (r.kind == Zygote::Report::kReady || it == execs_.end() || !it->second.zygote ||
          it->second.pid != 0) {
        continue;
      }
      if (r.kind == Zygote::Report::kPid) {
        it->second.pid = r.pid;
        by_pid_[r.pid] = r.id;
        if (!Send(Msg::kStarted, WithId(r.id))) return false;
      } else {
        CloseExec(it->second);
        execs_.erase(it);
        if (!Fail(r.id, "fork server: " + r.why)) return false;
      }
    }
    if (!open && zygote_.running()) {
      zygote_.Kill();  // reaped as any process; what it had not forked yet cannot start
      return FailUnforked("the fork server ended");
    }
    return true;
  }

  bool FailUnforked(const std::string& why) {
    for (auto it = execs_.begin(); it != execs_.end();) {
      if (!it->second.zygote || it->second.pid != 0) {
        ++it;
        continue;
      }
      const uint32_t id = it->first;
      CloseExec(it->second);
      it = execs_.erase(it);
      if (!Fail(id, why)) return false;
    }
    return true;
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
    execs_[id].unacked += static_cast<uint64_t>(n);
    Send(Msg::kOutput, EncodeOutput(id, stream, std::string_view(buf, static_cast<size_t>(n))));
  }

  // As init, the agent reaps every process of the container: an exec's own status is kept, the
  // orphans it left are only collected.
  bool Reap() {
    signalfd_siginfo info;
    while (::read(sig_fd_, &info, sizeof info) > 0) {
    }
    if (!ReadZygote()) return false;
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      if (pid == zygote_.pid()) {
        zygote_.Died();
        if (!FailUnforked("the fork server ended")) return false;
        continue;
      }
      auto it = by_pid_.find(pid);
      if (it == by_pid_.end()) continue;
      Exec& e = execs_[it->second];
      e.reaped = true;
      e.status = StatusOf(status);
      by_pid_.erase(it);
      // What the run wrapper does after an exec'd program (sandbox_shell.h): nothing it left
      // keeps its output open; the fork server is spared.
      if (e.zygote && zygote_.running()) KillAllButSessions({zygote_.pid()}, false);
      if (e.zygote && !zygote_.running()) ::kill(-1, SIGKILL);
    }
    return true;
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

  // Kill first, then check: a program's leftover could change the agent or the fork server
  // after a check. The server is spared by pid only while it is the agent's unreaped child.
  bool Recycle() {
    egress_.Stop();  // the next execution has a policy of its own, or none
    std::string error;
    pid_t spared = zygote_.running() ? zygote_.pid() : 0;
    KillAndReapEverything(&error, &spared);
    if (spared == 0) zygote_.Died();  // none, or it had died: reaped there
    for (auto& [id, e] : execs_) CloseExec(e);
    execs_.clear();
    by_pid_.clear();
    // Like the fork server's, the agent's own scheduling, CPU set and limits are in reach of the
    // program's user (prlimit is refused by seccomp, renice and sched_setscheduler are not): a
    // changed agent is not handed to another execution.
    const std::string changed = AttributeChange(own_attributes_, ProcessAttributes(::getpid()));
    if (error.empty() && !changed.empty()) error = "the agent itself was changed: " + changed;
    std::vector<std::string> uncovered = UncoveredWritableMounts(roots_);
    if (error.empty() && !uncovered.empty()) {
      error = "writable mount not wiped between executions: " + uncovered[0];
    }
    // The fork server outlives recycles unless a program could have changed it
    // (python_fork_server.h).
    std::string note;
    if (error.empty() && (zygote_.running() || zygote_request_)) note = zygote_.Changed();
    if (!note.empty()) note = "the fork server was replaced: " + note;
    if (error.empty() && !note.empty() && zygote_.running()) {
      zygote_.Kill();
      spared = 0;
      KillAndReapEverything(&error, &spared);
      zygote_.Died();
    }
    if (error.empty()) WipeRoots(roots_, &error);
    if (error.empty()) RemoveSysvIpc(&error);
    // Nothing may have started since the kill; the server is started only once that holds.
    if (error.empty()) KillAndReapEverything(&error, &spared);
    if (spared == 0) zygote_.Died();
    if (error.empty() && !zygote_.running() && zygote_request_) StartZygote();
    std::string answer(1, error.empty() ? 1 : 0);
    return Send(Msg::kRecycled, answer + (error.empty() ? note : error));
  }

  int Quit(int code) {
    ::kill(-1, SIGKILL);
    return code;
  }

  const AgentOptions& o_;
  int sig_fd_ = -1;
  EgressRelay egress_{[this](Msg type, std::string_view payload) { return Send(type, payload); }};
  std::vector<WipeRoot> roots_;
  FrameReader reader_;
  std::map<uint32_t, Exec> execs_;
  bool windowed_ = false;  // the daemon acknowledges output (its kHello): kOutputWindow holds
  std::map<pid_t, uint32_t> by_pid_;
  Zygote zygote_;
  std::optional<ExecRequest> zygote_request_;  // to start it again after a recycle
  std::string own_attributes_;                 // ProcessAttributes of the agent at its start
};

}  // namespace

int RunExecAgent(const AgentOptions& options) { return Agent(options).Serve(); }

}  // namespace ci::agent
