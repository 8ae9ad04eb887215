// A hardening measure as a typed value: what a backend applies to every sandbox of a spec. The
// backends derive their report (/health `hardening.enforced`, the startup log, STRICT_HARDENING)
// from the very translation they run (local: the shim Plan; docker: the ContainerCreate body),
// so the report cannot claim what the sandbox does not get. Tests compare each kind with what is
// really in force inside a sandbox (tests/runtime/enforcement_test.cc,
// tests/docker/executor_test.cc EnforcementReportIsWhatIsInForce).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ci {

// A new kind needs its label in measure.cc and a probe in both enforcement tests (each fails on
// a kind it cannot check, so no report line goes unproven).
enum class MeasureKind {
  kUserNamespace,
  kPidNamespace,
  kMountNamespace,
  kNetworkNamespace,  // only loopback inside
  kReadOnlyRoot,
  kNoCapabilities,  // every capability set empty
  kNoNewPrivs,
  kSeccomp,      // detail: the profile ("default profile")
  kMemoryLimit,  // amount: bytes, swap included
  kPidsLimit,    // amount: processes and threads of the whole sandbox
  kCpuCap,       // amount: percent of one CPU (CFS bandwidth)
  kCpuTime,      // amount: seconds of CPU per program (RLIMIT_CPU)
  // Kernel quotas per process (SandboxLimits), amount: the soft = hard limit.
  kOpenFilesLimit,       // RLIMIT_NOFILE
  kQueuedSignalsLimit,   // RLIMIT_SIGPENDING
  kMessageQueueLimit,    // RLIMIT_MSGQUEUE, bytes
  kLockedMemoryLimit,    // RLIMIT_MEMLOCK, bytes
  kUserNamespaceQuotas,  // the sandbox's own /proc/sys/user: inotify 32, no nested namespaces
  kNoTerminal,           // no controlling terminal, no /dev/tty to reach one
  kOwnHostIds,           // detail: the range; one host uid/gid per live sandbox
  kInitUnreachable,      // init is another user inside: no signal, prlimit, ptrace from the program
};

struct Measure {
  Measure(MeasureKind k, uint64_t a = 0, std::string d = {})  // NOLINT: {kind, amount, detail}
      : kind(k), amount(a), detail(std::move(d)) {}
  MeasureKind kind;
  uint64_t amount = 0;  // the limit's value for the limit kinds (see above), else 0
  std::string detail;   // how it is applied: "cgroup v1", "RLIMIT_DATA, per process", "docker"
  bool operator==(const Measure&) const = default;
};

// Its line in /health and the log: "memory limit 256 MiB (cgroup v1)", "CPU cap 50% (docker)".
std::string MeasureName(const Measure& m);
std::vector<std::string> MeasureNames(const std::vector<Measure>& measures);

// A hardening measure this backend cannot honour on this host (docs/architecture.md
// "Downgrades"): logged once at startup with the fix, shown by /health, refused under
// STRICT_HARDENING=true.
struct Downgrade {
  std::string measure;  // "memory limit (cgroup)"
  std::string reason;   // "no cgroup memory controller is available to this user"
  std::string fix;      // "run as root, or give the daemon a delegated cgroup v2 subtree"
};

// The seccomp filter of a named profile (SandboxSecurity::seccomp_profile_name): "seccomp
// (default profile)"; "seccomp" when unnamed.
Measure SeccompMeasure(const std::string& profile_name);

// SECCOMP_LOG_DENIED (SandboxSecurity::seccomp_log_denied): the profile's denials are logged and
// let through, the same downgrade on every backend. `seccomp` is the measure it replaces.
Downgrade SeccompLogOnly(const Measure& seccomp);

}  // namespace ci
