// Capabilities and privilege flags (shim child only).
#pragma once

#include "runtime/sys_error.h"

namespace ci {

// Empties the bounding set. Needs CAP_SETPCAP, so it runs while still namespace root.
SysError DropBoundingSet();
// Clears the ambient set and sets permitted/effective/inheritable to empty through libcap.
SysError DropAllCapabilities();
// execve can then never grant privileges (setuid bits, file capabilities); required by seccomp
// for unprivileged filters anyway.
SysError SetNoNewPrivs();
// Init keeps its fds (the daemon's sockets) away from ptrace and /proc/1/fd of the program,
// which runs as the same uid.
SysError SetNotDumpable();

}  // namespace ci
