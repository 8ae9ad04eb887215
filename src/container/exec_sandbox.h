// One container's or pod's sandbox (the Sandbox of core/executor.h), driven over exec
// (container_api.h): a program's run under its wrapper, a session's background programs and
// interpreter calls, Collect, Destroy and Kill, each a few named steps over the pieces of this
// directory. The docker and kubernetes backends both use it. README "One execution", "Sessions".
#pragma once

#include <boost/asio/awaitable.hpp>
#include <memory>

#include "container/container_exec.h"
#include "core/executor.h"

namespace ci::container {

// The sandbox in the started container or running pod `c`. host_cgroups: the counters may be
// read on this host when c.api->HostInitPid() finds PID 1 (a local Docker Engine).
std::unique_ptr<Sandbox> MakeExecSandbox(Container c, bool host_cgroups);

// The same, with c.prestart_argv started now under the run's wrapper, its stdin held open: a run
// of that argv with a go line (RunPayload::go) stages its files, writes the go and its stdin, and
// takes over that program, whose start then is not the request's. When it cannot start, runs
// start their program as usual.
asio::awaitable<std::unique_ptr<Sandbox>> MakePrestartedExecSandbox(Container c, bool host_cgroups);

}  // namespace ci::container
