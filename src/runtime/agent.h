// Init's service loop once the sandbox is built: it answers the daemon on fd 4 (stage files, run
// the program, collect the workspace, exit). Single-threaded, blocking, exception-free.
#pragma once

#include "runtime/messages.h"

namespace ci {

// Sends "ready" and serves until kExit or EOF; returns init's exit code.
int RunAgent();

// Forks the program (stdio = fds 5/6/7, own process group, rlimits), waits for it or for a kill
// request on fd 4, then kills and reaps everything else in the sandbox. `agent_gone` is set when
// fd 4 hit EOF meanwhile.
proto::Exited RunProgram(const proto::RunRequest& req, int signal_fd, bool* agent_gone);

}  // namespace ci
