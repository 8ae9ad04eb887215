// The local backend's reaper: removes the cgroups of sandboxes whose parent is gone (a daemon
// killed without its shutdown, a shim or the fork server's zygote killed by a signal); run at
// startup and when the fork server is found dead. Docker's reaper is src/docker/reaper.cc; this
// is the same idea for cgroups.
#pragma once

#include <string>
#include <vector>

#include "runtime/wire/plan.h"

namespace ci::runtime {

// Every <sandbox cgroup> under the layout (v2: <root>/<name>; v1: <root>/<controller>/
// code-interpreter/<name> for every controller) whose name is "<pid>-<hex>" and whose pid is not a
// live sandbox parent (a shim or a zygote), or whose name has no pid (an older format) and holds
// no process. Whatever is inside is killed first. Cgroups of live parents, of this daemon or
// another, are never touched. Returns the paths removed; `failures` gets "<path>: <reason>" for
// the ones that could not be.
std::vector<std::string> ReapOrphanCgroups(const CgroupLayout& layout,
                                           std::vector<std::string>* failures);

}  // namespace ci::runtime
