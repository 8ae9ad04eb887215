#include "runtime/init/processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "runtime/init/sandbox_init.h"
#include "runtime/wire/protocol.h"

namespace ci::runtime {
namespace {

using proto::Msg;

int pending_status_fd = -1;         // the status pipe of the next kSpawn (its stdio is 5/6/7)
std::map<pid_t, int> status_pipes;  // running spawned processes: pid -> status pipe
std::vector<pid_t> ever_spawned;    // every pid started so (a signal to an ended one is ok)

bool ReplyFrame(Msg type, std::string_view payload = {}) {
  return proto::WriteFrame(kServiceFd, type, payload) == 0;
}

bool ReplyError(const std::string& message) {
  return ReplyFrame(Msg::kError, proto::EncodeError(message));
}

}  // namespace

bool TakeProcessFds(std::vector<int>& fds) {
  if (pending_status_fd >= 0) ::close(pending_status_fd);
  pending_status_fd = -1;
  if (fds.size() != 4) {
    for (int fd : fds) ::close(fd);
    fds.clear();
    return false;
  }
  // Above the program's stdio first: it may have arrived on 5..7, which the others take.
  pending_status_fd = ::fcntl(fds[3], F_DUPFD_CLOEXEC, kProgramStderrFd + 1);
  ::close(fds[3]);
  fds.pop_back();
  return InstallProgramStdio(fds) && pending_status_fd >= 0;
}

bool SpawnProcess(std::string_view payload, const ProgramUser& user,
                  std::vector<pid_t>* background) {
  proto::RunRequest req;
  if (!proto::Decode(payload, &req) || req.argv.empty()) return ReplyError("malformed spawn");
  if (pending_status_fd < 0) return ReplyError("no stdio for the process (kProcessFds first)");
  struct stat st {};
  if (::stat(req.cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return ReplyFrame(Msg::kSpawned, proto::Encode(proto::Spawned{0, "no directory " + req.cwd}));
  }
  req.background = true;
  pid_t pid = ForkProgram(req, user, -1, /*process=*/true);
  const int status_fd = pending_status_fd;
  pending_status_fd = -1;
  if (pid < 0) {
    const int err = errno;
    ::close(status_fd);
    return ReplyFrame(Msg::kSpawned,
                      proto::Encode(proto::Spawned{0, std::string("fork: ") + std::strerror(err),
                                                   err == EAGAIN}));
  }
  background->push_back(pid);  // its pid is its session id (setsid)
  status_pipes[pid] = status_fd;
  ever_spawned.push_back(pid);
  return ReplyFrame(Msg::kSpawned, proto::Encode(proto::Spawned{static_cast<uint32_t>(pid)}));
}

bool SignalProcess(std::string_view payload) {
  proto::SignalRequest req;
  if (!proto::Decode(payload, &req) || req.signal <= 0 || req.signal >= NSIG) {
    return ReplyError("malformed signal request");
  }
  const auto pid = static_cast<pid_t>(req.pid);
  if (std::find(ever_spawned.begin(), ever_spawned.end(), pid) == ever_spawned.end()) {
    return ReplyError("no process " + std::to_string(req.pid) + " was started here");
  }
  // Its process group (its session's first): what it started goes too, as a terminal's ^C does.
  if (status_pipes.count(pid) != 0) ::kill(-pid, req.signal);
  return ReplyFrame(Msg::kSignalled);
}

void ChildReaped(pid_t pid, int status, std::vector<pid_t>* background) {
  background->erase(std::remove(background->begin(), background->end(), pid), background->end());
  auto it = status_pipes.find(pid);
  if (it == status_pipes.end()) return;
  proto::Exited end;
  if (WIFEXITED(status)) {
    end.has_exit_code = true;
    end.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    end.signal = WTERMSIG(status);
  }
  // Well under PIPE_BUF, so one write; the daemon may have gone (EPIPE is ignored by init).
  const std::string json = proto::Encode(end);
  (void)!::write(it->second, json.data(), json.size());
  ::close(it->second);
  status_pipes.erase(it);
}

void ReapEnded(std::vector<pid_t>* background) {
  int st = 0;
  for (pid_t w; (w = ::waitpid(-1, &st, WNOHANG)) > 0;) ChildReaped(w, st, background);
}

}  // namespace ci::runtime
