// `code-interpreter fork`: the fork server (src/runtime/README.md "Fork server"). A
// single-threaded process that loads Python once, imports the warm modules, and then forks one
// shim per request: the child becomes `code-interpreter shim` with the descriptors the daemon
// sent, without an exec, so the sandbox's init and the program it forks still hold the loaded
// interpreter (embedded_python.h). At its start it gets the modules and the daemon's own Python
// driver to compile; per request, nothing but descriptors: no request's data ever enters it, and
// a child cannot write to it (its own copy of the memory).
//
// On fd 3, a stream socket to the daemon:
//   daemon -> zygote: the modules to import, each followed by '\n', then '\0'; the Python
//                     sources to compile ahead (none empty or holding '\0'), each followed by
//                     '\0', then '\0'
//   zygote -> daemon: 'R' once the interpreter is up (or 'F' and why, then it exits)
//   daemon -> zygote: 'S' with five descriptors (SCM_RIGHTS): the shim's fds 3..7 (shim_spawn.h)
//   zygote -> daemon: the child's pid (4 bytes, host order) with its pidfd (SCM_RIGHTS); pid 0
//                     when the fork failed
// EOF on fd 3 (the daemon is gone) ends it; its shims live on.
#pragma once

namespace ci::runtime {

constexpr int kZygoteControlFd = 3;

// The first entry of the zygote's environment, not the sandboxes': the dynamic loader binds
// every library's symbols at the zygote's start, so no shim, init or program it forks resolves
// one lazily again (each did: its own copy of the tables, written page by page).
constexpr const char* kZygoteBindNow = "LD_BIND_NOW=1";

int ZygoteMain(int argc, char** argv);

}  // namespace ci::runtime
