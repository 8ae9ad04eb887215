// `code-interpreter fork`: the fork server (src/runtime/README.md "Fork server"). A
// single-threaded process that loads Python once, imports the warm modules, and then is the
// parent of every sandbox the daemon asks it for: it does what a spawned shim does for its one
// sandbox (sandbox_parent.h: ids, cgroup, the clone of init, id maps; then supervision, the
// counters, the cgroup's removal), without an exec, so the sandbox's init and the program it
// forks still hold the loaded interpreter (embedded_python.h). A sandbox is two processes (init
// and the program), not three. At its start it gets the modules and the daemon's own Python
// driver to compile; per sandbox, descriptors and the plan (the sandbox's configuration: no
// program, no file, nothing of a request); a child cannot write to it (its own copy of the
// memory), and it is outside every sandbox's namespaces.
//
// On fd 3, a stream socket to the daemon:
//   daemon -> zygote: the modules to import, each followed by '\n', then '\0'; the Python
//                     sources to compile ahead (none empty or holding '\0'), each followed by
//                     '\0', then '\0'
//   zygote -> daemon: 'R' once the interpreter is up (or 'F' and why, then it exits)
//   daemon -> zygote: 'S' with five descriptors (SCM_RIGHTS): a shim's fds 3..7 (shim_spawn.h)
//   zygote -> daemon: kZygoteSupervises (4 bytes, host order)
// Then each sandbox's lifecycle socket (fd 3 of the five) speaks the shim's protocol: the plan,
// "kill", the report once init is gone; its EOF tells the daemon the cgroup is removed. EOF on
// the control socket ends the zygote once its last sandbox is gone.
#pragma once

#include <cstdint>

namespace ci::runtime {

constexpr int kZygoteControlFd = 3;

// The answer to a request: the zygote is the sandbox's parent (no shim process).
constexpr int32_t kZygoteSupervises = 0;

// The first entry of the zygote's environment, not the sandboxes': the dynamic loader binds
// every library's symbols at the zygote's start, so no init or program it starts resolves
// one lazily again (each did: its own copy of the tables, written page by page).
constexpr const char* kZygoteBindNow = "LD_BIND_NOW=1";

int ZygoteMain(int argc, char** argv);

}  // namespace ci::runtime
