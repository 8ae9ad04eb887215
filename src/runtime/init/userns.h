// The user namespace, child side: who init and the program are inside (the parent side, the id
// maps, is sandbox_ids.h).
//
// Init and the program are different users inside whenever the maps hold two ids (as root, and
// rootless with subordinate ids): init stays the namespace's root, the program runs as the
// sandbox user, so the program can neither signal, prlimit nor ptrace init. Rootless with the
// one-id map both are the sandbox user: a reported downgrade.
#pragma once

#include <cstdint>

#include "runtime/kernel/sys_error.h"

namespace ci::runtime {

// Right after the maps exist: become the namespace's root. Until then the child still runs with
// the host's uid 0, which is unmapped inside, so the kernel refuses to create files owned by it
// (EOVERFLOW on every mkdir of the rootfs).
SysError BecomeNamespaceRoot();
// Init's identity for serving runs, after the mounts. With two ids: no supplementary groups,
// still uid/gid 0 inside, but file system ids of the sandbox user, so what init stages and
// collects in /workspace is the program's own (created as it, read with its rights). With one
// id: setresgid/setresuid to the sandbox user (no-ops that confirm the identity; setgroups is
// denied there).
SysError SwitchToInitUser(uint32_t uid, uint32_t gid, bool two_ids);
// The program, in init's child before exec (two ids only): no supplementary groups, the sandbox
// user's ids. Capabilities are dropped separately.
SysError SwitchToSandboxUser(uint32_t uid, uint32_t gid);

}  // namespace ci::runtime
