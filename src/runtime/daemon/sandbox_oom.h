// The OOM kills of a live local sandbox, read by the daemon from the sandbox's cgroup (the shim
// names it; the daemon finds it from the cgroup of the shim's first descendant that is in another
// one than the shim). Sessions need it per call: the shim's report comes only when the sandbox is
// gone.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "runtime/wire/plan.h"

namespace ci::runtime {

// The counter file ("<dir>/memory.events" on v2, "<memory dir>/memory.oom_control" on v1) of the
// sandbox under shim `shim_pid`; empty when there is none (no cgroup, rootless without one).
std::string FindSandboxOomFile(pid_t shim_pid, const CgroupLayout& layout);

// The same for a sandbox whose parent is the fork server's zygote, from its init's host pid.
std::string FindSandboxOomFileOfInit(pid_t init_pid, const CgroupLayout& layout);

// The name of the sandbox's cgroup (its last path component, the same in every v1 hierarchy),
// found the same way: under shim `shim_pid`, or from `init_pid` when the shim pid is 0 (the
// zygote's sandbox); empty when there is none.
std::string FindSandboxCgroupName(pid_t shim_pid, pid_t init_pid, const CgroupLayout& layout);

// The oom_kill count in that file; 0 when unreadable.
uint64_t ReadOomKills(const std::string& file);

}  // namespace ci::runtime
