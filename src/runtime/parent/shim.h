// Entry point of `code-interpreter shim` (also declared in local_executor.h for main.cc).
#pragma once

namespace ci::runtime {

// argv[0] = "code-interpreter", argv[1] = "shim". Expects fds 3-7 as set up by the daemon's spawn
// (see sandbox_init.h). Returns the process exit code.
int ShimMain(int argc, char** argv);

}  // namespace ci::runtime
