// `code-interpreter shim`: the single-threaded parent of one sandbox. It receives the plan on
// fd 3, creates the cgroup, clones init into fresh namespaces, maps its ids, moves it into the
// cgroup and lets it go; then it waits for init to die (on its own, on the daemon's "kill", or
// because the daemon vanished), reports the cgroup's verdict on fd 3, removes the cgroup and
// exits. Built with -fno-exceptions.
#include "runtime/shim.h"

#include <fcntl.h>
#include <linux/securebits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "core/pidfd.h"
#include "runtime/cgroups.h"
#include "runtime/host_checks.h"
#include "runtime/messages.h"
#include "runtime/protocol.h"
#include "runtime/rootless.h"
#include "runtime/sandbox_ids.h"
#include "runtime/sandbox_init.h"
#include "runtime/unique_fd.h"

namespace ci::runtime {
namespace {

using proto::Msg;

void Log(const std::string& message) {
  std::fprintf(stderr, "code-interpreter shim[%d]: %s\n", ::getpid(), message.c_str());
}

// Parent-side failures travel on fd 4 like the child's, so Prepare() waits on one channel.
int ReportSetupFailure(const char* stage, const SysError& e) {
  proto::SetupError msg{stage, e.err, e.what};
  (void)proto::WriteFrame(kAgentFd, Msg::kSetupError, proto::Encode(msg));
  return 1;
}

// clone() with fork semantics (no new stack): the child gets a copy of this single-threaded
// process, so it may allocate. CLONE_NEWCGROUP is left out on purpose: the child unshares it
// once it sits in its cgroup, so the sandbox sees that cgroup as "/".
pid_t CloneSandbox() {
  const unsigned long flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET |
                              CLONE_NEWIPC | CLONE_NEWUTS | SIGCHLD;
  return static_cast<pid_t>(::syscall(SYS_clone, flags, nullptr, nullptr, nullptr, nullptr));
}

// As root, the new user namespace must be owned by the sandbox's own host uid, not by root: the
// kernel charges what is counted per user inside a namespace (inotify instances, queued signals,
// message queue bytes, processes) to the namespace's owner as well, so a root-owned namespace
// would let one sandbox use up root's share on the host. The owner is the creator's effective
// uid, so the clone runs with euid = `owner`. NO_SETUID_FIXUP keeps the effective capabilities
// across the switch (the clone may need CAP_SYS_ADMIN where unprivileged user namespaces are
// off); the real and saved uids stay 0, so euid 0 comes back right after.
pid_t CloneSandboxOwnedBy(uid_t owner) {
  if (owner == 0) return CloneSandbox();
  if (::prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0) != 0 ||
      ::setresuid(-1, owner, -1) != 0) {
    return -1;
  }
  pid_t pid = CloneSandbox();
  if (pid == 0) return 0;  // init: its stages set every id and securebit of their own
  int err = errno;
  if (::setresuid(-1, 0, -1) != 0 || ::prctl(PR_SET_SECUREBITS, 0, 0, 0, 0) != 0) {
    Log("restoring euid 0 after the clone failed: " + std::string(std::strerror(errno)));
    if (pid > 0) ::kill(pid, SIGKILL);
    ::_exit(1);
  }
  errno = err;
  return pid;
}

// Waits for init to exit. A kKill or EOF on fd 3 (the daemon died) SIGKILLs init, which takes
// the whole pid namespace with it. Returns whether fd 3 is still usable for the report.
bool SuperviseUntilExit(pid_t init) {
  UniqueFd pidfd(PidfdOpen(init));
  bool daemon_alive = true;
  bool killed = false;
  std::string payload;
  if (!pidfd.valid()) {
    Log("pidfd_open failed, killing the sandbox: " + std::string(std::strerror(errno)));
    ::kill(init, SIGKILL);
  }
  while (pidfd.valid()) {
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
    return ReportSetupFailure("plan", SysFailErr(EPROTO, "no valid plan on fd 3"));
  }

  // This sandbox's host ids, held (the lock) until the shim exits.
  IdMaps maps;
  maps.rootless = plan.rootless;
  maps.inside_uid = plan.uid;
  maps.inside_gid = plan.gid;
  UniqueFd id_lock;
  if (!plan.host_uids.empty()) {
    uint32_t index = 0;
    const uint32_t count =
        plan.host_gids.count < plan.host_uids.count ? plan.host_gids.count : plan.host_uids.count;
    if (SysError e = ClaimIdIndex(plan.id_lock_dir, count, &index, &id_lock); !e.ok()) {
      return ReportSetupFailure("sandbox_ids", e);
    }
    maps.program_uid = plan.host_uids.first + index;
    maps.program_gid = plan.host_gids.first + index;
  }

  // No cgroup (version 0) when the daemon found none its user may write: rlimits instead.
  std::unique_ptr<Cgroup> cgroup =
      plan.cgroup.version == 0 ? MakeNoCgroup() : MakeCgroup(plan.cgroup, SandboxCgroupName());
  if (SysError e = cgroup->Create({plan.memory_bytes, plan.pids, plan.cpu_percent}); !e.ok()) {
    (void)cgroup->Remove();
    return ReportSetupFailure("cgroup", e);
  }
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) {
    (void)cgroup->Remove();
    return ReportSetupFailure("go_pipe", SysFail("pipe2"));
  }
  pid_t init = CloneSandboxOwnedBy(plan.rootless ? 0 : maps.program_uid);
  if (init == 0) {
    ::close(go[1]);
    SandboxInitMain(plan, go[0]);
  }
  ::close(go[0]);
  UniqueFd go_write(go[1]);
  SysError setup = init < 0 ? SysFail("clone") : WriteIdMaps(init, maps);
  if (init < 0 && plan.rootless) {
    // Unprivileged user namespaces switched off by the host: say which knob and how to fix it.
    HostCheckInputs in;
    in.rootless = true;
    std::string why = ExplainUserNamespaceFailure(setup.err, in);
    if (!why.empty()) setup.what = "clone(CLONE_NEWUSER): " + why;
  }
  const char* stage = init < 0 ? "clone" : "id_maps";
  // Into the cgroup before "go": everything init and the program ever fork is then accounted.
  if (setup.ok()) setup = cgroup->AddProcess(init), stage = "cgroup_attach";
  if (setup.ok() && ::write(go_write.get(), "G", 1) != 1) setup = SysFail("write go"), stage = "go";
  if (!setup.ok()) {
    ReportSetupFailure(stage, setup);
    if (init > 0) {
      ::kill(init, SIGKILL);
      while (::waitpid(init, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    (void)cgroup->Remove();
    return 1;
  }
  // go_write stays open while the shim lives: init checks it for a hang-up once it re-armed its
  // death signal (a credential change clears it), to know the shim did not die in between.
  // Init holds the agent socket and the program's stdio now; without our copies, the daemon sees
  // EOF on them as soon as the sandbox is gone.
  for (int fd : {kAgentFd, kProgramStdinFd, kProgramStdoutFd, kProgramStderrFd}) ::close(fd);

  bool daemon_alive = SuperviseUntilExit(init);
  // The counters are final once init is gone: the daemon gets them before the cgroup's removal
  // (which it waits for in the background), so an answer does not wait for the rmdir.
  CgroupStats stats = cgroup->ReadStats();
  if (daemon_alive) {
    (void)proto::WriteFrame(kLifecycleFd, Msg::kReport, proto::Encode(proto::CgroupReport{stats}));
  }
  SysError removed = cgroup->Remove();
  if (!removed.ok()) {
    Log("removing cgroup failed: " + removed.what + ": " + std::strerror(removed.err));
  }
  return 0;
}

}  // namespace ci::runtime
