// A session's process (core/executor.h SandboxProcess) in a container or pod: one exec of
// process_start.sh, which says the process's pid before it becomes the program; its output
// streams from the exec and its end is the exec's exit status.
#pragma once

#include <memory>

#include "container/container_exec.h"
#include "core/executor.h"

namespace ci::container {

// Starts it and reads its pid. An error: it did not start (no such cwd, the exec failed).
asio::awaitable<Result<std::unique_ptr<SandboxProcess>>> StartExecProcess(const Container& c,
                                                                          ProcessSpec spec);

}  // namespace ci::container
