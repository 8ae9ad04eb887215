#include "runtime/parent/sandbox_parent.h"

#include <fcntl.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "core/pidfd.h"
#include "runtime/init/rootless.h"
#include "runtime/kernel/host_checks.h"
#include "runtime/kernel/sandbox_ids.h"
#include "runtime/wire/messages.h"
#include "runtime/wire/protocol.h"

namespace ci::runtime {
namespace {

void ParentLog(const std::string& message) {
  std::fprintf(stderr, "code-interpreter sandbox parent[%d]: %s\n", ::getpid(), message.c_str());
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
    ParentLog("restoring euid 0 after the clone failed: " + std::string(std::strerror(errno)));
    if (pid > 0) ::kill(pid, SIGKILL);
    ::_exit(1);
  }
  errno = err;
  return pid;
}

}  // namespace

void ReportSetupFailure(int service_fd, const char* stage, const SysError& e) {
  proto::SetupError msg{stage, e.err, e.what};
  (void)proto::WriteFrame(service_fd, proto::Msg::kSetupError, proto::Encode(msg));
}

bool StartSandbox(const Plan& plan, int service_fd, const std::function<void(int go_fd)>& in_init,
                  SandboxParent* out) {
  // This sandbox's host ids, held (the lock) as long as `out` lives.
  IdMaps maps;
  maps.rootless = plan.rootless;
  maps.inside_uid = plan.uid;
  maps.inside_gid = plan.gid;
  if (!plan.host_uids.empty()) {
    uint32_t index = 0;
    const uint32_t count =
        plan.host_gids.count < plan.host_uids.count ? plan.host_gids.count : plan.host_uids.count;
    if (SysError e = ClaimIdIndex(plan.id_lock_dir, count, &index, &out->id_lock); !e.ok()) {
      ReportSetupFailure(service_fd, "sandbox_ids", e);
      return false;
    }
    maps.program_uid = plan.host_uids.first + index;
    maps.program_gid = plan.host_gids.first + index;
  }

  // No cgroup (version 0) when the daemon found none its user may write: rlimits instead.
  out->cgroup =
      plan.cgroup.version == 0 ? MakeNoCgroup() : MakeCgroup(plan.cgroup, SandboxCgroupName());
  if (SysError e = out->cgroup->Create({plan.memory_bytes, plan.pids, plan.cpu_percent}); !e.ok()) {
    (void)out->cgroup->Remove();
    ReportSetupFailure(service_fd, "cgroup", e);
    return false;
  }
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) {
    (void)out->cgroup->Remove();
    ReportSetupFailure(service_fd, "go_pipe", SysFail("pipe2"));
    return false;
  }
  pid_t init = CloneSandboxOwnedBy(plan.rootless ? 0 : maps.program_uid);
  if (init == 0) {
    ::close(go[1]);
    in_init(go[0]);
    ::_exit(1);  // not reached: in_init ends in SandboxInitMain
  }
  ::close(go[0]);
  out->go_write.reset(go[1]);
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
  if (setup.ok()) setup = out->cgroup->AddProcess(init), stage = "cgroup_attach";
  if (setup.ok()) out->init_pidfd.reset(PidfdOpen(init)), stage = "pidfd";
  if (setup.ok() && !out->init_pidfd.valid()) setup = SysFail("pidfd_open");
  if (setup.ok() && ::write(go[1], "G", 1) != 1) setup = SysFail("write go"), stage = "go";
  if (!setup.ok()) {
    ReportSetupFailure(service_fd, stage, setup);
    if (init > 0) {
      ::kill(init, SIGKILL);
      while (::waitpid(init, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    (void)out->cgroup->Remove();
    out->init_pidfd.reset();
    return false;
  }
  out->init = init;
  return true;
}

void OnLifecycleReadable(SandboxParent* parent, int lifecycle_fd) {
  proto::Msg type = proto::Msg::kKill;
  std::string payload;
  if (proto::ReadFrame(lifecycle_fd, &type, &payload) != 0) parent->daemon_alive = false;
  if ((!parent->daemon_alive || type == proto::Msg::kKill) && !parent->killed) {
    ::kill(parent->init, SIGKILL);
    // A frozen sandbox (Sandbox::Freeze) takes the kill only once thawed under cgroup v1.
    (void)parent->cgroup->ThawForKill();
    parent->killed = true;
  }
}

void FinishSandbox(SandboxParent* parent, int lifecycle_fd) {
  while (::waitpid(parent->init, nullptr, 0) < 0 && errno == EINTR) {
  }
  // The counters are final once init is gone: the daemon gets them before the cgroup's removal
  // (which it waits for in the background), so an answer does not wait for the rmdir.
  const CgroupStats stats = parent->cgroup->ReadStats();
  if (parent->daemon_alive) {
    (void)proto::WriteFrame(lifecycle_fd, proto::Msg::kReport,
                            proto::Encode(proto::CgroupReport{stats}));
  }
  SysError removed = parent->cgroup->Remove();
  if (!removed.ok()) {
    ParentLog("removing cgroup failed: " + removed.what + ": " + std::strerror(removed.err));
  }
}

}  // namespace ci::runtime
