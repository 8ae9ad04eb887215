// What changes when the daemon runs as an unprivileged user (see src/runtime/README.md "Rootless"):
// no cgroup unless a writable one was delegated, so memory and process limits fall back to rlimits.
#pragma once

#include <memory>

#include "runtime/kernel/cgroups.h"
#include "runtime/kernel/sys_error.h"
#include "runtime/wire/plan.h"

namespace ci::runtime {

// Whether this process may create sandbox cgroups under `layout` (write + search on the parent
// directories every controller needs). Root always may; v1 hierarchies never let others.
bool CgroupWritableByMe(const CgroupLayout& layout);

// The Cgroup of a sandbox without one (plan.cgroup.version == 0): every operation succeeds and
// reports nothing.
std::unique_ptr<Cgroup> MakeNoCgroup();

// Init, when the plan has no cgroup: RLIMIT_DATA = memory_bytes, RLIMIT_NPROC = pids, inherited by
// the program and everything it starts.
SysError SetFallbackRlimits(const Plan& plan);

}  // namespace ci::runtime
