// `code-interpreter shim`: the single-threaded parent of one sandbox. It receives the plan on
// fd 3, creates the cgroup, clones init into fresh namespaces, maps its ids, moves it into the
// cgroup and lets it go; then it waits for init to die (on its own, on the daemon's "kill", or
// because the daemon vanished), reports the cgroup's verdict on fd 3, removes the cgroup and
// exits. Built with -fno-exceptions.
#include "runtime/parent/shim.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstring>

#include "runtime/init/sandbox_init.h"
#include "runtime/kernel/unique_fd.h"
#include "runtime/parent/sandbox_parent.h"
#include "runtime/wire/messages.h"
#include "runtime/wire/protocol.h"

namespace ci::runtime {
namespace {

using proto::Msg;

// Waits for init to exit; a kKill or EOF on fd 3 (the daemon died) kills it first.
void SuperviseUntilExit(SandboxParent* parent) {
  for (;;) {
    struct pollfd fds[2] = {{parent->init_pidfd.get(), POLLIN, 0},
                            {parent->daemon_alive ? kLifecycleFd : -1, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      ::kill(parent->init, SIGKILL);
      (void)parent->cgroup->ThawForKill();
      return;
    }
    if (fds[0].revents & POLLIN) return;  // init exited
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) OnLifecycleReadable(parent, kLifecycleFd);
  }
}

}  // namespace

int ShimMain(int /*argc*/, char** /*argv*/) {
  (void)::prctl(PR_SET_NAME, "ci-shim", 0, 0, 0);  // ps and perf tell shims from inits (ci-init)
  // Spawned with default dispositions: a write to a daemon that closed its end of a socket fails
  // with EPIPE instead of killing us before the cleanup below (init inherits this, as the fork
  // server's inits have it; each program gets default dispositions again).
  ::signal(SIGPIPE, SIG_IGN);
  // No PR_SET_PDEATHSIG here, deliberately (see src/runtime/README.md): a SIGKILL on the daemon's
  // death would skip the cgroup cleanup below, and the signal follows the daemon *thread* that
  // spawned us, so a thread-pool thread exiting would kill a healthy sandbox. The daemon's death
  // closes fd 3; the EOF makes us kill init, clean up and exit.
  Msg type;
  std::string payload;
  Plan plan;
  if (proto::ReadFrame(kLifecycleFd, &type, &payload) != 0 || type != Msg::kPlan ||
      !DecodePlan(payload, &plan)) {
    ReportSetupFailure(kServiceFd, "plan", SysFailErr(EPROTO, "no valid plan on fd 3"));
    return 1;
  }

  SandboxParent parent;
  if (!StartSandbox(
          plan, kServiceFd, [&plan](int go_fd) { SandboxInitMain(plan, go_fd); }, &parent)) {
    return 1;
  }
  // go_write stays open while the shim lives: init checks it for a hang-up once it re-armed its
  // death signal (a credential change clears it), to know the shim did not die in between.
  // Init holds the service socket and the program's stdio now; without our copies, the daemon sees
  // EOF on them as soon as the sandbox is gone.
  for (int fd : {kServiceFd, kProgramStdinFd, kProgramStdoutFd, kProgramStderrFd}) ::close(fd);

  SuperviseUntilExit(&parent);
  FinishSandbox(&parent, kLifecycleFd);
  return 0;
}

}  // namespace ci::runtime
