#include "runtime/init/sandbox_init.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <functional>

#include "runtime/init/caps.h"
#include "runtime/init/kernel_quotas.h"
#include "runtime/init/mounts.h"
#include "runtime/init/netns.h"
#include "runtime/init/rootfs.h"
#include "runtime/init/rootless.h"
#include "runtime/init/seccomp.h"
#include "runtime/init/service_loop.h"
#include "runtime/init/userns.h"
#include "runtime/wire/messages.h"
#include "runtime/wire/protocol.h"

namespace ci::runtime {
namespace {

// Where the new root is assembled. A mount here is private to the sandbox's mount namespace, and
// an image rootfs below /tmp stays reachable through the fd opened beforehand.
constexpr const char* kNewRoot = "/tmp";

SysError AwaitParent(int go_fd) {
  char byte = 0;
  ssize_t n;
  do {
    n = ::read(go_fd, &byte, 1);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return SysFail("read the go signal");
  // EOF: the parent died before "go"; PDEATHSIG was set first, so nothing can slip between.
  if (n == 0 || byte != 'G') return SysFailErr(ECHILD, "the shim parent exited before go");
  return SysOk();
}

// The kernel clears the death signal on every change of the effective or file system ids
// (namespace_root, init_user), so it is set again once they are final. The shim holds the go
// pipe's write end for its whole life: a hang-up means it died before the signal was back.
SysError RearmParentDeathSignal(int go_fd) {
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return SysFail("PDEATHSIG");
  struct pollfd p = {go_fd, POLLIN, 0};
  if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR)) != 0) {
    return SysFailErr(ECHILD, "the shim parent exited during setup");
  }
  return SysOk();
}

SysError CloseStrayFds() {
  // 0-2 become /dev/null (no path to the daemon's log); only 4 (service) and 5-7 (program stdio)
  // survive. Everything else, the rootfs fd and the go pipe included, is closed.
  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0) return SysFail("open /dev/null");
  for (int fd = 0; fd <= 2; ++fd) {
    if (null_fd != fd && ::dup2(null_fd, fd) < 0) return SysFail("dup2 /dev/null");
  }
  if (null_fd > 2) ::close(null_fd);
  ::close(kLifecycleFd);
  if (::close_range(kProgramStderrFd + 1, ~0U, 0) != 0) return SysFail("close_range");
  return SysOk();
}

SysError SetHostname(const std::string& name) {
  if (::sethostname(name.data(), name.size()) != 0) return SysFail("sethostname");
  return SysOk();
}

}  // namespace

void FailSetup(const char* stage, int err, const std::string& message) {
  proto::SetupError e{stage, err, message};
  (void)proto::WriteFrame(kServiceFd, proto::Msg::kSetupError, proto::Encode(e));
  ::_exit(1);
}

void SandboxInitMain(const Plan& plan, int go_fd) {
  (void)::prctl(PR_SET_NAME, "ci-init", 0, 0, 0);  // PID 1's name, inside and out
  const std::string root = kNewRoot;
  int rootfs_fd = -1;
  struct Stage {
    const char* name;
    std::function<SysError()> run;
  };
  // The containment order, top to bottom. Kernel constraints that fix it:
  // - the death signal before waiting, so a parent dying at any point takes the child along, and
  //   again after the last id change (which clears it);
  // - a session of its own, so no controlling terminal is ever reachable (the shim has none
  //   either: it is spawned with setsid);
  // - namespace root right after the maps (file creation needs a mapped fsuid);
  // - the cgroup namespace after the parent moved us into our cgroup, so it is our "/";
  // - all mounts before pivot_root, the root read-only after it;
  // - lo and hostname while CAP_NET_ADMIN/CAP_SYS_ADMIN are still held;
  // - the bounding set and securebits while CAP_SETPCAP is held, i.e. before leaving uid 0;
  // - the user namespace's own quotas after the cgroup namespace (itself counted against them);
  // - seccomp last: every earlier stage may need syscalls the profile forbids.
  // Init stays the namespace's root with three capabilities (userns.h, caps.h) whenever the maps
  // hold two ids; the program is started as the sandbox user by init's child.
  // Rootless with the one-id map: init is the sandbox user from the start (its one mapped id) yet
  // holds every capability in its new user namespace, so all stages but two run unchanged: there
  // is no namespace root to become (uid 0 is unmapped), and setgroups is denied (see
  // WriteIdMaps); it drops every capability, and the program runs as init's own user.
  // Without a cgroup (cgroup.version 0) the limits become rlimits, set before the program exists.
  const Stage stages[] = {
      {"parent_death_signal",
       [] { return ::prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 ? SysOk() : SysFail("PDEATHSIG"); }},
      {"wait_for_parent", [&] { return AwaitParent(go_fd); }},
      {"new_session", [] { return ::setsid() >= 0 ? SysOk() : SysFail("setsid"); }},
      {"open_rootfs", [&] { return OpenRootfsDir(plan, &rootfs_fd); }},
      {"namespace_root", [&] { return plan.TwoIds() ? BecomeNamespaceRoot() : SysOk(); }},
      {"cgroup_namespace",
       [] { return ::unshare(CLONE_NEWCGROUP) == 0 ? SysOk() : SysFail("unshare cgroup ns"); }},
      {"user_namespace_quotas", [] { return SetUserNamespaceQuotas(); }},
      {"mount_private", [] { return MakeMountsPrivate(); }},
      {"rootfs", [&] { return BuildRootfs(plan, rootfs_fd, root); }},
      {"scratch_tmpfs", [&] { return MountScratch(plan, root); }},
      {"dev", [&] { return BuildDev(plan, root); }},
      {"proc", [&] { return MountProc(root); }},
      {"mask_paths", [&] { return MaskProcPaths(root); }},
      {"pivot_root", [&] { return PivotRoot(root); }},
      {"root_readonly", [&] { return plan.read_only_root ? RemountRootReadOnly() : SysOk(); }},
      {"loopback", [] { return BringUpLoopback(); }},
      {"hostname", [&] { return SetHostname(plan.hostname); }},
      {"bounding_set", [] { return DropBoundingSet(); }},
      {"securebits", [] { return LockSecurebits(); }},
      {"init_user", [&] { return SwitchToInitUser(plan.uid, plan.gid, plan.TwoIds()); }},
      {"capabilities",
       [&] { return plan.TwoIds() ? KeepInitCapabilities() : DropAllCapabilities(); }},
      {"parent_death_signal_again", [&] { return RearmParentDeathSignal(go_fd); }},
      {"no_new_privs", [&] { return plan.no_new_privs ? SetNoNewPrivs() : SysOk(); }},
      {"not_dumpable", [] { return SetNotDumpable(); }},
      {"rlimits",
       [&] {
         CI_SYS_RETURN_IF_ERROR(SetSandboxRlimits(plan));
         return plan.cgroup.version == 0 ? SetFallbackRlimits(plan) : SysOk();
       }},
      {"close_fds", [] { return CloseStrayFds(); }},
      {"seccomp", [&] { return LoadSeccomp(plan); }},
  };
  for (const Stage& stage : stages) {
    SysError e = stage.run();
    if (!e.ok()) FailSetup(stage.name, e.err, e.what);
  }
  ::_exit(ServeDaemon(plan.session_expires_at, {plan.TwoIds(), plan.uid, plan.gid}));
}

}  // namespace ci::runtime
