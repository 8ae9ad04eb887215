// Kernel quotas of one sandbox, so that nothing a sandbox does is felt by the host or another
// sandbox (README "Security model"). Two halves:
// - per process rlimits (open files, queued signals, POSIX message queue bytes, locked memory),
//   set in the shim before it creates the user namespace: the namespace records them as its own
//   ceilings for what it may charge to its owner, and init and the program inherit them;
// - the new user namespace's /proc/sys/user limits (inotify, fanotify, nested namespaces), set by
//   init while it holds CAP_SYS_RESOURCE in that namespace.
// Who *owns* the namespace decides whose host-wide counters are charged: see sandbox_ids.h.
#pragma once

#include "runtime/sys_error.h"

namespace ci {

struct RlimitQuota {
  int resource;
  unsigned long value;  // soft and hard
};
// RLIMIT_NOFILE 1024, RLIMIT_SIGPENDING 1024, RLIMIT_MSGQUEUE 800 KiB, RLIMIT_MEMLOCK 8 MiB.
extern const RlimitQuota kSandboxRlimits[4];

struct UserNamespaceQuota {
  const char* name;  // under /proc/sys/user/
  unsigned long value;
};
// Inotify instances 32 and watches 8192; no fanotify; no nested namespaces of any kind.
extern const UserNamespaceQuota kSandboxUserNamespaceQuotas[12];

SysError SetSandboxRlimits();
// In the new user namespace, before its capabilities are dropped. Limits this kernel does not
// have are skipped.
SysError SetUserNamespaceQuotas();

}  // namespace ci
