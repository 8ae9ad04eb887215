// Mount helpers shared by the rootfs, /etc and /dev builders (shim child only).
#pragma once

#include <string>

#include "runtime/kernel/sys_error.h"

namespace ci::runtime {

// Creates an empty mount point at `dst` of the same kind as `src` (directory or file).
SysError MakeMountPointLike(const std::string& src, const std::string& dst);
// Bind-mounts src onto dst, then remounts it read-only, nosuid, nodev. A bind mount ignores
// MS_RDONLY on the first call, hence the remount; the remount keeps the source's atime/noexec
// flags because inside a user namespace clearing a locked flag fails with EPERM.
SysError BindReadOnly(const std::string& src, const std::string& dst);
// Bind-mounts src onto dst (creating the mount point) keeping it writable: device nodes.
SysError BindWritable(const std::string& src, const std::string& dst);
// Remounts an existing mount point read-only keeping its other flags.
SysError RemountReadOnly(const std::string& path);
// Recreates the symlink `src` at `dst` with the same target (on Debian 12 /bin is "usr/bin").
SysError ReplicateSymlink(const std::string& src, const std::string& dst);
SysError MountTmpfs(const std::string& dst, const std::string& options, unsigned long flags);
SysError WriteNewFile(const std::string& path, const std::string& content);

}  // namespace ci::runtime
