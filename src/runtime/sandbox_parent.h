// The parent's side of one sandbox, whoever the parent is: the shim (one sandbox, spawned by
// the daemon) or the fork server's zygote (each of its sandboxes). It claims the sandbox's host
// ids, creates its cgroup, clones init into fresh namespaces, maps init's ids, moves it into the
// cgroup and lets it go; once init is gone, it reads the cgroup's counters and removes it.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>

#include "runtime/cgroups.h"
#include "runtime/plan.h"
#include "runtime/sys_error.h"
#include "runtime/unique_fd.h"

namespace ci::runtime {

// What the parent holds while the sandbox lives.
struct SandboxParent {
  pid_t init = -1;
  UniqueFd init_pidfd;  // readable once init exited
  std::unique_ptr<Cgroup> cgroup;
  UniqueFd id_lock;   // the sandbox's host ids, claimed until the parent lets go of them
  UniqueFd go_write;  // held open: init checks it for a hang-up to know its parent lives
};

// A failure of the parent's, reported on the agent socket as init reports its own (the daemon
// waits on one channel).
void ReportSetupFailure(int agent_fd, const char* stage, const SysError& e);

// Starts the sandbox. `in_init` runs first in init, the clone's child, with the read end of
// the go pipe; it never returns (it ends in SandboxInitMain). A failure is reported on
// `agent_fd` (proto::SetupError, as init reports its own) and everything made is undone; false
// then.
bool StartSandbox(const Plan& plan, int agent_fd, const std::function<void(int go_fd)>& in_init,
                  SandboxParent* out);

// After init was reaped: the counters (final now), then `report` is called with them, then the
// cgroup is removed; the ids are let go when `parent` is destroyed.
void FinishSandbox(SandboxParent* parent, const std::function<void(const CgroupStats&)>& report);

}  // namespace ci::runtime
