// Capabilities and privilege flags (shim child only).
#pragma once

#include "runtime/kernel/sys_error.h"

namespace ci::runtime {

// Empties the bounding set. Needs CAP_SETPCAP, so it runs while still namespace root.
SysError DropBoundingSet();
// Locks the securebits so no later execve or uid change can regain capabilities: uid 0 gets no
// special treatment (NOROOT), uid changes do not touch the sets (NO_SETUID_FIXUP; we drop them
// explicitly), the ambient set cannot be raised; each bit and KEEP_CAPS are locked. Needs
// CAP_SETPCAP, so it runs while still namespace root.
SysError LockSecurebits();
// Clears the ambient set and sets permitted/effective/inheritable to empty.
SysError DropAllCapabilities();
// Init's set when it is a user of its own (two ids, see userns.h): CAP_SETUID and CAP_SETGID to
// start the program as the sandbox user, CAP_KILL to kill whatever the program leaves. Only in
// the sandbox's user namespace, permitted and effective; nothing inheritable, no ambient.
SysError KeepInitCapabilities();
// execve can then never grant privileges (setuid bits, file capabilities); required by seccomp
// for unprivileged filters anyway.
SysError SetNoNewPrivs();
// Init keeps its fds (the daemon's sockets) away from ptrace and /proc/1/fd of the program,
// which runs as the same uid.
SysError SetNotDumpable();

}  // namespace ci::runtime
