// What the host must provide for the local runtime, checked in one place: used by
// CheckLocalRuntime (/health, /ready), by the shim to explain a failed clone(CLONE_NEWUSER), and
// by the `doctor` command. Exception-free (the shim links it).
#pragma once

#include <string>
#include <vector>

namespace ci::runtime {

struct HostFinding {
  std::string what;      // "unprivileged user namespaces (AppArmor)"
  bool ok = true;        // false: sandboxes will not start (or, when !required, a weaker sandbox)
  bool required = true;  // false: a warning, sandboxes still start
  std::string detail;    // what was read: "kernel.apparmor_restrict_unprivileged_userns = 1"
  std::string fix;       // what to do when !ok; empty when ok
};

// Where the checks read. Tests point these at files of their own.
struct HostCheckInputs {
  std::string proc_sys = "/proc/sys";
  std::string proc_self_ns = "/proc/self/ns";
  bool rootless = false;  // the daemon's euid != 0 (RunsRootless())
  // Supplementary groups of the daemon; -1 = getgroups(). Rootless sandboxes keep them (below).
  int supplementary_groups = -1;
};

// euid != 0: the daemon (and so the shim) cannot write arbitrary id maps or create cgroups.
bool RunsRootless();

// User-namespace prerequisites (max_user_namespaces, Debian's unprivileged_userns_clone,
// AppArmor's apparmor_restrict_unprivileged_userns), the namespace kinds, and, when rootless, the
// supplementary groups the sandbox would keep. In a fixed order; every check is listed, ok or not.
std::vector<HostFinding> CheckUserNamespaceHost(const HostCheckInputs& in);

// The first failed required finding as "what: detail. Fix: fix", or "" when none failed.
std::string FirstBlocker(const std::vector<HostFinding>& findings);

// For a clone(CLONE_NEWUSER) that failed with `err`: the host setting that explains it, with the
// fix, or "" when none of the known ones applies (then the errno speaks for itself).
std::string ExplainUserNamespaceFailure(int err, const HostCheckInputs& in);

}  // namespace ci::runtime
