// The parent's side of one sandbox, whoever the parent is: the shim (one sandbox, spawned by
// the daemon) or the fork server's zygote (each of its sandboxes). It claims the sandbox's host
// ids, creates its cgroup, clones init into fresh namespaces, maps init's ids, moves it into the
// cgroup and lets it go; once init is gone, it reads the cgroup's counters and removes it.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>

#include "runtime/kernel/cgroups.h"
#include "runtime/kernel/sys_error.h"
#include "runtime/kernel/unique_fd.h"
#include "runtime/wire/plan.h"

namespace ci::runtime {

// What the parent holds while the sandbox lives.
struct SandboxParent {
  pid_t init = -1;
  UniqueFd init_pidfd;  // readable once init exited
  std::unique_ptr<Cgroup> cgroup;
  UniqueFd id_lock;          // the sandbox's host ids, claimed until the parent lets go of them
  UniqueFd go_write;         // held open: init checks it for a hang-up to know its parent lives
  bool daemon_alive = true;  // the lifecycle socket still open on the daemon's side
  bool killed = false;       // init was sent SIGKILL
};

// A failure of the parent's, reported on the service socket as init reports its own (the daemon
// waits on one channel).
void ReportSetupFailure(int service_fd, const char* stage, const SysError& e);

// Starts the sandbox. `in_init` runs first in init, the clone's child, with the read end of
// the go pipe; it never returns (it ends in SandboxInitMain). A failure is reported on
// `service_fd` (proto::SetupError, as init reports its own) and everything made is undone; false
// then.
bool StartSandbox(const Plan& plan, int service_fd, const std::function<void(int go_fd)>& in_init,
                  SandboxParent* out);

// The sandbox's lifecycle socket is readable: "kill", or EOF (the daemon is gone, or gave the
// sandbox up). Either kills init, which takes the whole pid namespace with it (a frozen one is
// killed whole and thawed: Cgroup::ThawForKill).
void OnLifecycleReadable(SandboxParent* parent, int lifecycle_fd);

// Once init exited: reaps it, reports the counters (final now) on the lifecycle socket while the
// daemon listens, then removes the cgroup; the ids are let go when `parent` is destroyed.
void FinishSandbox(SandboxParent* parent, int lifecycle_fd);

}  // namespace ci::runtime
