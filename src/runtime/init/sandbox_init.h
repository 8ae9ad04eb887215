// The sandbox's init: the clone()d child of the shim, PID 1 of the new pid namespace.
#pragma once

#include "runtime/wire/plan.h"

namespace ci::runtime {

// Fixed descriptors shared by the daemon, the shim and init (set up by the spawn).
constexpr int kLifecycleFd = 3;  // daemon <-> shim parent
constexpr int kServiceFd = 4;    // daemon <-> init
constexpr int kProgramStdinFd = 5;
constexpr int kProgramStdoutFd = 6;
constexpr int kProgramStderrFd = 7;

// Builds the sandbox stage by stage (each failure is reported as {stage, errno, message} on fd 4),
// then serves the daemon (service_loop.h). Never returns. `go_fd` is the read end of the pipe on
// which the parent signals that the id maps and the cgroup are in place.
[[noreturn]] void SandboxInitMain(const Plan& plan, int go_fd);

// Reports a setup failure on fd 4 (best effort) and exits.
[[noreturn]] void FailSetup(const char* stage, int err, const std::string& message);

}  // namespace ci::runtime
