// One container's or pod's sandbox (the Sandbox of core/executor.h), driven over exec
// (container_api.h): a program's run under its wrapper, a session's background programs and
// interpreter calls, Collect, Destroy and Kill, each a few named steps over the pieces of this
// directory. The docker and kubernetes backends both use it. README "One execution", "Sessions".
#pragma once

#include <memory>

#include "core/executor.h"
#include "docker/container_exec.h"

namespace ci::docker {

// The sandbox in the started container or running pod `c`. host_cgroups: the counters may be
// read on this host when c.api->HostInitPid() finds PID 1 (a local Docker Engine).
std::unique_ptr<Sandbox> MakeExecSandbox(Container c, bool host_cgroups);

}  // namespace ci::docker
