// Collect (README "One execution", step 4): `tar -c --sparse --format=gnu` of the workspace over
// an exec, its members written into files under CollectLimits::dest_dir within the limits (holes
// stay holes), or nothing at all when the host can see that the workspace is empty.
#pragma once

#include <sys/types.h>

#include <boost/asio/awaitable.hpp>
#include <string>

#include "container/container_exec.h"
#include "core/executor.h"
#include "core/status.h"

namespace ci::container {

// True when the workspace `cwd` holds nothing but the regular file `skip_path`, as seen from the
// host through PID 1's root (local Engine only; names are read, never followed), which saves the
// tar exec. False when it cannot tell (not root here).
bool WorkspaceHoldsNothing(pid_t init_pid, const std::string& cwd, const std::string& skip_path);

// The workspace's files (but limits.skip_path); on an error none is left in dest_dir.
asio::awaitable<Result<Collection>> CollectWorkspace(const Container& c,
                                                     const CollectLimits& limits, ExecHold hold);

}  // namespace ci::container
