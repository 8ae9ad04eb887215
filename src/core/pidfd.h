// pidfd_open via syscall(2): glibc 2.36's <sys/pidfd.h> lacks C linkage for C++ callers.
#pragma once

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

namespace ci {

// A file descriptor (always O_CLOEXEC) that becomes readable when `pid` exits; -1 with errno.
inline int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

}  // namespace ci
