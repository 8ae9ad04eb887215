// The sandbox's mount namespace after the rootfs: scratch tmpfs, /proc, /dev, masked paths and
// the switch of root (shim child only). Each function is one stage of the child's checklist.
#pragma once

#include <string>

#include "runtime/kernel/sys_error.h"
#include "runtime/wire/plan.h"

namespace ci::runtime {

// Mount events must not propagate back to the host (systemd makes / shared by default).
SysError MakeMountsPrivate();
// tmpfs /workspace (owned by the sandbox user, and bound at /home/user too) and /tmp (sticky,
// world-writable).
SysError MountScratch(const Plan& plan, const std::string& newroot);
// A proc of the new pid namespace; it only shows the sandbox's own processes.
SysError MountProc(const std::string& newroot);
// tmpfs /dev with the harmless host device nodes bound in, /dev/shm and the fd symlinks.
SysError BuildDev(const Plan& plan, const std::string& newroot);
// /dev/null over the /proc files that leak host information or act on the host; /proc/sys,
// /proc/irq and /proc/bus read-only.
SysError MaskProcPaths(const std::string& newroot);
// pivot_root(".", ".") then a lazy unmount of the old root stacked underneath: no old root
// directory is needed, and nothing of the host's tree stays reachable.
SysError PivotRoot(const std::string& newroot);
SysError RemountRootReadOnly();

}  // namespace ci::runtime
