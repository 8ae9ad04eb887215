// The user namespace: the parent side writes the id maps, the child side switches identity.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "runtime/sys_error.h"

namespace ci {

// Parent: "0 65534 1" (root inside is nobody outside) and "<id> <id> 1" (the sandbox user keeps
// its number). setgroups stays allowed: the root writer may, and the child needs it to drop the
// daemon's supplementary groups.
SysError WriteIdMaps(pid_t child, uint32_t uid, uint32_t gid);
// Child, right after the maps exist: become the namespace's root. Until then the child still runs
// with the host's uid 0, which is unmapped inside, so the kernel refuses to create files owned
// by it (EOVERFLOW on every mkdir of the rootfs).
SysError BecomeNamespaceRoot();
// Child, after the mounts: setgroups(0), setresgid, setresuid to the sandbox user. This clears
// the permitted and effective capability sets (no SECBIT_KEEP_CAPS).
SysError SwitchToSandboxUser(uint32_t uid, uint32_t gid);

}  // namespace ci
