// The sandbox's root filesystem, assembled on a fresh tmpfs before pivot_root (shim child only).
#pragma once

#include <string>

#include "runtime/kernel/sys_error.h"
#include "runtime/wire/plan.h"

namespace ci::runtime {

// Opens plan.rootfs (a directory) before anything is mounted over the staging point, so a rootfs
// anywhere (even under /tmp) stays reachable through /proc/self/fd. Returns -1 for "host".
SysError OpenRootfsDir(const Plan& plan, int* fd);
// Mounts a tmpfs at `newroot` and fills it: read-only binds of the host's /usr and /lib* (symlinks
// replicated) plus a generated /etc, or read-only binds of the rootfs directory's top-level
// entries (including its own /etc).
SysError BuildRootfs(const Plan& plan, int rootfs_fd, const std::string& newroot);
// A generated minimal /etc plus read-only binds of a short allowlist of host entries.
SysError BuildHostEtc(const Plan& plan, const std::string& newroot);

}  // namespace ci::runtime
