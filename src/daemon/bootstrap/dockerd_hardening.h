// The hardening applied to the nested dockerd's process itself (Docker-in-Docker), from policies/:
// a seccomp filter (seccomp-dockerd.json) and capabilities taken away for good
// (dockerd-capabilities.json). Everything dockerd starts (containerd, runc, every container)
// inherits both; a container's own filter stacks on top.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ci::daemon {

struct DroppedCapability {
  int number = 0;    // CAP_SYS_MODULE
  std::string name;  // "CAP_SYS_MODULE"
  std::string why;
};

// Prepared in the daemon before the fork: the child only makes system calls with these values.
struct DockerdHardening {
  std::string seccomp_bpf;  // struct sock_filter[] of seccomp-dockerd.json for this machine
  std::vector<DroppedCapability> dropped;
  uint64_t drop_mask = 0;  // 1 << number of every dropped capability
};

// Compiles the embedded profiles; an error names the policy that is wrong.
Result<DockerdHardening> PrepareDockerdHardening();

// In the forked child, before execve (async-signal-safe: system calls only): drops the
// capabilities from the bounding set (needs CAP_SETPCAP), then from the permitted, effective and
// inheritable sets, clears the ambient set, then installs the filter (needs CAP_SYS_ADMIN, kept:
// no_new_privs is not set, so runc can still change to a container's AppArmor profile). Returns
// 0, or the errno of the step that failed (`step` names it).
int ApplyDockerdHardening(const DockerdHardening& h, const char** step);

// What /proc/PID/status says the process was given: "Seccomp" (0 none, 1 strict, 2 filter) and
// "CapBnd"/"CapEff" as masks. Read by /health and compared by the tests.
struct ProcessSecurity {
  int seccomp_mode = -1;
  uint64_t cap_bounding = 0;
  uint64_t cap_effective = 0;
  bool no_new_privs = false;
};
Result<ProcessSecurity> ReadProcessSecurity(pid_t pid);

}  // namespace ci::daemon
