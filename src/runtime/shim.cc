// `code-interpreter shim`: the single-threaded parent of one sandbox. It receives the plan on
// fd 3, creates the cgroup, clones init into fresh namespaces, maps its ids, moves it into the
// cgroup and lets it go; then it waits for init to die (on its own, on the daemon's "kill", or
// because the daemon vanished), reports the cgroup's verdict on fd 3, removes the cgroup and
// exits. Built with -fno-exceptions.
#include "runtime/shim.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "runtime/messages.h"
#include "runtime/protocol.h"
#include "runtime/sandbox_init.h"
#include "runtime/sandbox_parent.h"
#include "runtime/unique_fd.h"

namespace ci::runtime {
namespace {

using proto::Msg;

// Waits for init to exit. A kKill or EOF on fd 3 (the daemon died) SIGKILLs init, which takes
// the whole pid namespace with it. Returns whether fd 3 is still usable for the report.
bool SuperviseUntilExit(const SandboxParent& parent) {
  const pid_t init = parent.init;
  const UniqueFd& pidfd = parent.init_pidfd;
  bool daemon_alive = true;
  bool killed = false;
  std::string payload;
  for (;;) {
    struct pollfd fds[2] = {{pidfd.get(), POLLIN, 0},
                            {daemon_alive ? kLifecycleFd : -1, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      ::kill(init, SIGKILL);
      break;
    }
    if (fds[0].revents & POLLIN) break;  // init exited
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      Msg type = Msg::kKill;
      if (proto::ReadFrame(kLifecycleFd, &type, &payload) != 0) daemon_alive = false;
      if ((!daemon_alive || type == Msg::kKill) && !killed) {
        ::kill(init, SIGKILL);
        killed = true;
      }
    }
  }
  int status = 0;
  while (::waitpid(init, &status, 0) < 0 && errno == EINTR) {
  }
  return daemon_alive;
}

}  // namespace

int ShimMain(int /*argc*/, char** /*argv*/) {
  (void)::prctl(PR_SET_NAME, "ci-shim", 0, 0, 0);  // ps and perf tell shims from inits (ci-init)
  // No PR_SET_PDEATHSIG here, deliberately (see README.md): a SIGKILL on the daemon's death would
  // skip the cgroup cleanup below, and the signal follows the daemon *thread* that spawned us, so
  // a thread-pool thread exiting would kill a healthy sandbox. The daemon's death closes fd 3;
  // the EOF makes us kill init, clean up and exit.
  Msg type;
  std::string payload;
  Plan plan;
  if (proto::ReadFrame(kLifecycleFd, &type, &payload) != 0 || type != Msg::kPlan ||
      !DecodePlan(payload, &plan)) {
    ReportSetupFailure(kAgentFd, "plan", SysFailErr(EPROTO, "no valid plan on fd 3"));
    return 1;
  }

  SandboxParent parent;
  if (!StartSandbox(
          plan, kAgentFd, [&plan](int go_fd) { SandboxInitMain(plan, go_fd); }, &parent)) {
    return 1;
  }
  // go_write stays open while the shim lives: init checks it for a hang-up once it re-armed its
  // death signal (a credential change clears it), to know the shim did not die in between.
  // Init holds the agent socket and the program's stdio now; without our copies, the daemon sees
  // EOF on them as soon as the sandbox is gone.
  for (int fd : {kAgentFd, kProgramStdinFd, kProgramStdoutFd, kProgramStderrFd}) ::close(fd);

  const bool daemon_alive = SuperviseUntilExit(parent);
  FinishSandbox(&parent, [daemon_alive](const CgroupStats& stats) {
    if (!daemon_alive) return;
    (void)proto::WriteFrame(kLifecycleFd, Msg::kReport, proto::Encode(proto::CgroupReport{stats}));
  });
  return 0;
}

}  // namespace ci::runtime
