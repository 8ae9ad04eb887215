// The user namespace: the parent side writes the id maps, the child side switches identity.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "runtime/sys_error.h"

namespace ci {

// Parent. As root: "0 65534 1" (root inside is nobody outside) and "<id> <id> 1" (the sandbox
// user keeps its number); setgroups stays allowed: the root writer may, and the child needs it to
// drop the daemon's supplementary groups.
// Rootless: the kernel lets an unprivileged writer map exactly one id, its own, and a gid_map only
// after setgroups is denied, so "<id> <euid> 1", "deny", "<id> <egid> 1": the sandbox user is the
// daemon's user outside and nothing else (no root) exists inside.
SysError WriteIdMaps(pid_t child, uint32_t uid, uint32_t gid, bool rootless);
// Child, right after the maps exist: become the namespace's root. Until then the child still runs
// with the host's uid 0, which is unmapped inside, so the kernel refuses to create files owned
// by it (EOVERFLOW on every mkdir of the rootfs).
SysError BecomeNamespaceRoot();
// Child, after the mounts: setgroups(0), setresgid, setresuid to the sandbox user. Rootless,
// init already is that user (the only mapped id) and setgroups is denied, so only the no-op
// setresgid/setresuid remain (they confirm the identity).
SysError SwitchToSandboxUser(uint32_t uid, uint32_t gid, bool rootless);

}  // namespace ci
