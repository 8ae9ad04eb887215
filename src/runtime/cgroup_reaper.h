// The local backend's startup reaper: removes the cgroups of sandboxes whose shim is gone (a
// daemon killed without its shutdown, a shim killed by a signal). Docker's reaper is
// src/docker/reaper.cc; this is the same idea for cgroups.
#pragma once

#include <string>
#include <vector>

#include "runtime/plan.h"

namespace ci::runtime {

// Every <sandbox cgroup> under the layout (v2: <root>/<name>; v1: <root>/<controller>/
// code-interpreter/<name> for every controller) whose name is "<pid>-<hex>" and whose pid is not a
// live shim, or whose name has no pid (an older format) and holds no process. Whatever is inside
// is killed first. Cgroups of live shims, of this daemon or another, are never touched. Returns
// the paths removed; `failures` gets "<path>: <reason>" for the ones that could not be.
std::vector<std::string> ReapOrphanCgroups(const CgroupLayout& layout,
                                           std::vector<std::string>* failures);

}  // namespace ci::runtime
