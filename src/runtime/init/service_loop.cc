#include "runtime/init/service_loop.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <string>
#include <utility>

#include "core/sandbox_wipe.h"
#include "runtime/init/egress_socket.h"
#include "runtime/init/fs_util.h"
#include "runtime/init/processes.h"
#include "runtime/init/sandbox_init.h"
#include "runtime/init/session_calls.h"
#include "runtime/init/userns.h"
#include "runtime/kernel/unique_fd.h"
#include "runtime/wire/protocol.h"

namespace ci::runtime {
namespace {

using proto::Msg;

bool Send(Msg type, std::string_view payload = {}) {
  return proto::WriteFrame(kServiceFd, type, payload) == 0;
}

// Receives files as kFileBegin / kFileChunk* / kFileEnd. The first failure is kept and reported
// when the run request arrives, so the daemon can stream without waiting for acknowledgements.
class Stager {
 public:
  explicit Stager(int workspace_fd) : workspace_fd_(workspace_fd) {}

  void Begin(std::string_view payload) {
    file_.reset();
    proto::FileHeader h;
    if (!proto::Decode(payload, &h)) return Fail("malformed file header");
    path_ = h.path;
    int fd = -1;
    SysError e = CreateFileBelow(workspace_fd_, h.path, &fd);
    if (!e.ok()) return Fail(e.what + ": " + std::strerror(e.err));
    file_.reset(fd);
  }
  void Chunk(std::string_view data) {
    if (!file_.valid()) return;
    while (!data.empty()) {
      ssize_t n = ::write(file_.get(), data.data(), data.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Fail("write " + path_ + ": " + std::strerror(errno));
      data.remove_prefix(static_cast<size_t>(n));
    }
  }
  void End() { file_.reset(); }
  // Empty when every file was written.
  std::string TakeError() { return std::exchange(error_, {}); }

 private:
  void Fail(std::string message) {
    file_.reset();
    if (error_.empty()) error_ = "staging files: " + std::move(message);
  }
  int workspace_fd_;
  UniqueFd file_;
  std::string path_;
  std::string error_;
};

// Streams the workspace's regular files within the limits; false when fd 4 broke. A file that
// does not fit (by its apparent size: a sparse file counts whole) is left out and the walk goes
// on, so one huge file does not hide the small ones; leaving anything out sets truncated.
bool Collect(int workspace_fd, std::string_view payload) {
  proto::CollectRequest req;
  if (!proto::Decode(payload, &req)) return Send(Msg::kError, proto::EncodeError("bad collect"));
  uint64_t files = 0, total = 0;
  bool truncated = false, sent_ok = true;
  std::string buf(proto::kChunkSize, '\0');
  auto visit = [&](const std::string& path, int fd, uint64_t size) {
    if (path == req.skip_path) return true;
    struct stat st {};
    if (req.modified_after_ns != 0 && ::fstat(fd, &st) == 0 &&
        st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec <= req.modified_after_ns) {
      return true;
    }
    if (files + 1 > req.max_files) {
      truncated = true;
      return false;  // nothing more can fit
    }
    if (size > req.max_total_bytes - total) {
      truncated = true;
      return true;  // a smaller file may still fit
    }
    if (!(sent_ok = Send(Msg::kFileBegin, proto::Encode(proto::FileHeader{path, size})))) {
      return false;
    }
    uint64_t left = size;  // never more than announced, even if the file grew
    while (left > 0) {
      ssize_t n = ::read(fd, buf.data(), left < buf.size() ? left : buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (!(sent_ok = Send(Msg::kFileChunk, std::string_view(buf.data(), n)))) return false;
      left -= static_cast<uint64_t>(n);
    }
    ++files;
    total += size - left;
    return (sent_ok = Send(Msg::kFileEnd));
  };
  SysError e = WalkRegularFiles(workspace_fd, visit, &truncated);  // deep directories: truncated
  if (!sent_ok) return false;
  if (!e.ok()) {
    return Send(Msg::kError,
                proto::EncodeError("collecting files: " + e.what + ": " + std::strerror(e.err)));
  }
  return Send(Msg::kCollectDone, proto::EncodeCollectDone(truncated));
}

// A session's sandbox ends at its expiry by itself, so it outlives a crashed daemon by no more
// than its TTL. Init is PID 1: only a signal it handles reaches it, hence the handler.
void ArmExpiry(int64_t expires_at) {
  if (expires_at == 0) return;
  int64_t left = expires_at - static_cast<int64_t>(::time(nullptr));
  if (left <= 0) ::_exit(0);
  struct sigaction sa {};
  sa.sa_handler = [](int) { ::_exit(0); };
  ::sigaction(SIGALRM, &sa, nullptr);
  ::alarm(static_cast<unsigned>(left));
}

// Between runs a session's processes (kSpawn) end at any time: each is reaped as it does, so
// its status pipe tells the daemon at once.
void AwaitDaemonReaping(int signal_fd, std::vector<pid_t>* background) {
  struct pollfd fds[2] = {{kServiceFd, POLLIN, 0}, {signal_fd, POLLIN, 0}};
  for (;;) {
    ReapEnded(background);
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (::read(signal_fd, &si, sizeof si) == sizeof si) {
      }
    }
    if (fds[0].revents != 0) return;  // a frame, EOF, or an error for ReadFrame
  }
}

bool HavePipes() { return ::fcntl(kProgramStdoutFd, F_GETFD) >= 0; }

// What an execution leaves that the next one of the same client must not see; home/user is the
// workspace under a second name (mounts.cc).
const std::vector<std::string> kRecycledPlaces = {"/workspace", "/tmp", "/dev/shm", "/dev/mqueue",
                                                  "/home/user"};

// kRecycle: no process but init, nothing in the writable places, no System V IPC object; empty
// when done, else why not (the daemon then removes the sandbox). Only where the program is
// another user than init: it cannot have changed init or the places' roots beyond their mode.
std::string Recycle(const ProgramUser& user, const std::vector<WipeRoot>& roots,
                    const std::string& roots_error, std::vector<pid_t>* background) {
  if (!user.switch_user) return "init is the program's user: its sandboxes are not recycled";
  if (!roots_error.empty()) return roots_error;
  int status = 0;
  bool have_status = false;
  KillAndReapAll(0, &status, &have_status, background);
  if (!OnlyThisProcessLeft(0)) return "processes were left after the kill";
  const std::vector<std::string> uncovered = UncoveredWritableMounts(roots);
  if (!uncovered.empty()) return "writable mount not wiped between executions: " + uncovered[0];
  std::string error;
  if (!WipeRoots(roots, &error)) return error;  // init's file system uid is the program's
  if (!RemoveSysvIpc(&error)) {
    // Init's effective uid owns no object and has no capability for them: the program's user
    // removes its own, then init checks that nothing is left.
    pid_t child = ::fork();
    if (child == 0) {
      std::string ignored;
      ::_exit(SwitchToSandboxUser(user.uid, user.gid).ok() && RemoveSysvIpc(&ignored) ? 0 : 1);
    }
    int child_status = 0;
    while (child > 0 && ::waitpid(child, &child_status, 0) < 0 && errno == EINTR) {
    }
    error.clear();
    if (!RemoveSysvIpc(&error)) return error;
  }
  return "";
}

// Why init does not take a well-formed run request now; empty when it does.
std::string Refusal(const proto::RunRequest& req, bool ran, bool session,
                    const Prestarted& prestarted) {
  if (ran && !session) return "the program already ran in this sandbox";
  if ((req.prestart || req.resume) && session) {
    return "pre-started programs are for execution sandboxes";
  }
  if (req.prestart && prestarted.pid != 0) return "a program was pre-started already";
  if (req.resume) return prestarted.pid == 0 ? "nothing was pre-started" : "";
  if (!HavePipes()) return "no stdio pipes for the program (kPipes first)";
  return "";
}

}  // namespace

// kPipes: the three descriptors become the next program's stdio (fds 5/6/7). They arrive on the
// lowest free numbers, often 5..7 themselves in any order, so they are first moved out of the way.
bool InstallProgramStdio(std::vector<int>& fds) {
  bool ok = fds.size() == 3;
  for (int& fd : fds) {
    int high = ::fcntl(fd, F_DUPFD_CLOEXEC, kProgramStderrFd + 1);
    ::close(fd);
    fd = high;
    ok = ok && high >= 0;
  }
  const int targets[] = {kProgramStdinFd, kProgramStdoutFd, kProgramStderrFd};
  for (size_t i = 0; ok && i < 3; ++i) ok = ::dup2(fds[i], targets[i]) == targets[i];
  for (int fd : fds) ::close(fd);
  fds.clear();
  return ok;
}

int ServeDaemon(int64_t session_expires_at, const ProgramUser& user) {
  ArmExpiry(session_expires_at);
  const bool session = session_expires_at != 0;
  ::umask(022);
  // SIGCHLD is consumed through a signalfd so that waiting for the program and for the daemon's
  // messages is one poll(). Blocked here, unblocked again in the program before execve.
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  if (::sigprocmask(SIG_BLOCK, &chld, nullptr) != 0) FailSetup("service", errno, "block SIGCHLD");
  UniqueFd sig_fd(::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sig_fd.valid()) FailSetup("service", errno, "signalfd");
  UniqueFd workspace(::open("/workspace", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!workspace.valid()) FailSetup("service", errno, "open /workspace");
  if (!Send(Msg::kReady)) return 1;

  std::string roots_error;
  const std::vector<WipeRoot> roots =
      session ? std::vector<WipeRoot>{} : RecordRoots(kRecycledPlaces, &roots_error);
  bool egress = false;  // a listening socket went to the daemon: never recycled

  Stager stager(workspace.get());
  bool ran = false;
  std::vector<pid_t> background;  // session leaders of background programs, spared by kills
  SessionInterpreter server;      // the program serving calls (a session's interpreter), if any
  Prestarted prestarted;          // the program started ahead of its run, if any
  std::string payload;
  std::vector<int> fds;
  for (;;) {
    AwaitDaemonWatchingCpu(&server, &background);
    if (session) AwaitDaemonReaping(sig_fd.get(), &background);
    Msg type;
    if (proto::ReadFrame(kServiceFd, &type, &payload, &fds) != 0) return 0;  // daemon gone: exit
    if (type != Msg::kPipes && type != Msg::kProcessFds) {
      for (int fd : fds) ::close(fd);
      fds.clear();
    }
    switch (type) {
      case Msg::kPipes:
        if (!InstallProgramStdio(fds) &&
            !Send(Msg::kError, proto::EncodeError("bad pipes message"))) {
          return 1;
        }
        break;
      case Msg::kProcessFds:
        if (!session || !TakeProcessFds(fds)) {
          if (!Send(Msg::kError, proto::EncodeError("bad process fds message"))) return 1;
        }
        break;
      case Msg::kSpawn:
        if (!session) {
          if (!Send(Msg::kError, proto::EncodeError("processes are for session sandboxes"))) {
            return 1;
          }
        } else if (!SpawnProcess(payload, user, &background)) {
          return 0;
        }
        break;
      case Msg::kSignal:
        if (!SignalProcess(payload)) return 0;
        break;
      case Msg::kFileBegin:
        stager.Begin(payload);
        break;
      case Msg::kFileChunk:
        stager.Chunk(payload);
        break;
      case Msg::kFileEnd:
        stager.End();
        break;
      case Msg::kRun: {
        proto::RunRequest req;
        std::string error = stager.TakeError();
        if (error.empty() && !proto::Decode(payload, &req)) error = "malformed run request";
        if (error.empty()) error = Refusal(req, ran, session, prestarted);
        if (!error.empty()) {
          if (!Send(Msg::kError, proto::EncodeError(error))) return 1;
          break;
        }
        if (req.prestart) {
          std::string why;
          prestarted = PrestartProgram(req, user, &why);
          if (prestarted.pid == 0) {
            if (!Send(Msg::kError, proto::EncodeError(why))) return 1;
          } else if (!Send(Msg::kStarted)) {
            return 0;
          }
          break;
        }
        ran = true;
        bool daemon_gone = false;
        proto::Exited exited;
        if (req.resume) {
          std::optional<proto::Exited> resumed =
              ResumeProgram(prestarted, sig_fd.get(), &background, &daemon_gone);
          if (!resumed) break;  // kPrestartEnded went out: the daemon uses another sandbox
          exited = *resumed;
        } else if (!req.call.empty()) {
          exited = ServeCall(req, sig_fd.get(), &server, &background, &daemon_gone);
        } else {
          int call_socket = -1;
          exited = RunProgram(req, user, sig_fd.get(), &background, &daemon_gone, &call_socket);
          if (req.background && req.serves_calls) {
            SessionInterpreterStarted(&server, background, call_socket, req.cpu_time_sec);
          }
        }
        RunEnded(&server, !req.call.empty(), exited.cpu_ms);
        if (daemon_gone || !Send(Msg::kExited, proto::Encode(exited))) return 0;
        break;
      }
      case Msg::kCollect:
        if (!Collect(workspace.get(), payload)) return 1;
        break;
      case Msg::kEgressListen:
        egress = true;
        if (!ServeEgressListen(kServiceFd, payload)) return 1;
        break;
      case Msg::kRecycle: {
        std::string error = session  ? "sessions are not recycled"
                            : egress ? "a sandbox with egress is not recycled"
                                     : Recycle(user, roots, roots_error, &background);
        if (!error.empty()) {
          if (!Send(Msg::kError, proto::EncodeError(error))) return 1;
          break;
        }
        ran = false;
        prestarted = Prestarted{};
        (void)stager.TakeError();
        if (!Send(Msg::kRecycled)) return 1;
        break;
      }
      case Msg::kExit:
        return 0;
      default:
        break;  // a late kKillProgram after the program ended: nothing left to kill
    }
  }
}

}  // namespace ci::runtime
