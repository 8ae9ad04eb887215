// Kernel quotas of one sandbox, so that nothing a sandbox does is felt by the host or another
// sandbox (docs/security.md "Kernel quotas"). Two halves:
// - per process rlimits (SandboxLimits: open files, queued signals, POSIX message queue bytes,
//   locked memory), set by init for itself and the program. Not in the shim before the clone: a
//   new namespace takes its creator's rlimits as the ceiling of what *all* namespaces of that
//   owner together may charge to it, so a rootless daemon's sandboxes would share one quota;
// - the new user namespace's /proc/sys/user limits (inotify, fanotify, nested namespaces), set by
//   init while it holds CAP_SYS_RESOURCE in that namespace.
// Who *owns* the namespace decides whose host-wide counters are charged: see sandbox_ids.h.
#pragma once

#include "runtime/kernel/sys_error.h"
#include "runtime/wire/plan.h"

namespace ci::runtime {

struct UserNamespaceQuota {
  const char* name;  // under /proc/sys/user/
  unsigned long value;
};
// Inotify instances 32 and watches 8192; no fanotify; no nested namespaces of any kind.
extern const UserNamespaceQuota kSandboxUserNamespaceQuotas[12];

// Init: the plan's open_files, queued_signals, message_queue_bytes, locked_memory_bytes as soft
// and hard limits (never above what the daemon was given).
SysError SetSandboxRlimits(const Plan& plan);
// In the new user namespace, before its capabilities are dropped. Limits this kernel does not
// have are skipped.
SysError SetUserNamespaceQuotas();

}  // namespace ci::runtime
