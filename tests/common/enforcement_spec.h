// The spec both backends' enforcement tests report on and then probe: every limit set to a value
// no default has, so a probe that reads a default cannot pass by chance.
#pragma once

#include <map>
#include <sstream>
#include <string>

#include "core/executor.h"
#include "core/policies.h"

namespace ci::testing_support {

inline SandboxSpec WithDistinctLimits(SandboxSpec spec) {
  spec.security.seccomp_profile_json = std::string(*EmbeddedPolicy("seccomp-executor"));
  spec.security.seccomp_profile_name = "default";
  spec.limits.cpu_percent = 50;
  spec.limits.memory_bytes = 200ull << 20;
  spec.limits.pids = 48;
  spec.limits.cpu_time_sec = 7;
  return spec;
}

// "name; name; " of the enforced measures, for a SCOPED_TRACE.
inline std::string ReportedNames(const Enforcement& report) {
  std::string names;
  for (const std::string& n : MeasureNames(report.enforced)) names += n + "; ";
  return names;
}

// A bash script run inside a container or pod (docker and kubernetes enforcement tests): prints
// `key=value` lines of what is in force there (the /proc/self/status security fields, namespaces,
// interfaces, a write to /usr, RLIMIT_CPU, the cgroup's cpu/memory/pids limits v1 or v2, the
// kernel quotas of /proc/self/limits, the terminal). ParseProbe reads them back.
inline constexpr const char* kContainerProbeScript =
    "for k in Seccomp NoNewPrivs CapEff CapPrm CapBnd; do "
    "printf '%s=%s\\n' $k \"$(grep \"^$k:\" /proc/self/status | cut -f2)\"; done; "
    "for n in pid mnt net; do printf 'ns_%s=%s\\n' $n \"$(readlink /proc/self/ns/$n)\"; "
    "done; printf 'ifaces=%s\\n' \"$(ls /sys/class/net | tr '\\n' ' ')\"; "
    "touch /usr/x 2>/dev/null && echo usr=writable || echo usr=read-only; "
    "printf 'ulimit_t=%s\\n' \"$(ulimit -t)\"; cg=/sys/fs/cgroup; "
    "if [ -f $cg/cpu.max ]; then printf 'cpu=%s\\n' \"$(cat $cg/cpu.max)\"; "
    "printf 'mem=%s\\n' \"$(cat $cg/memory.max)\"; printf 'pids=%s\\n' \"$(cat "
    "$cg/pids.max)\"; else printf 'cpu=%s %s\\n' \"$(cat $cg/cpu/cpu.cfs_quota_us)\" "
    "\"$(cat $cg/cpu/cpu.cfs_period_us)\"; printf 'mem=%s\\n' \"$(cat "
    "$cg/memory/memory.limit_in_bytes)\"; printf 'pids=%s\\n' \"$(cat "
    "$cg/pids/pids.max)\"; fi; "
    "for l in 'open files:nofile' 'pending signals:sigpending' 'msgqueue size:msgqueue' "
    "'locked memory:memlock'; do printf 'limit_%s=%s\\n' \"${l#*:}\" \"$(grep \"^Max "
    "${l%:*}\" /proc/self/limits | awk '{print $(NF-2)}')\"; done; "
    "(exec 3<>/dev/tty) 2>/dev/null && echo tty=reachable || echo tty=none; "
    "printf 'tty_nr=%s\\n' \"$(cut -d' ' -f7 /proc/self/stat)\"";

// The probe's `key=value` lines as a map.
inline std::map<std::string, std::string> ParseProbe(const std::string& out) {
  std::map<std::string, std::string> in;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (size_t eq = line.find('='); eq != std::string::npos) {
      in[line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  return in;
}

}  // namespace ci::testing_support
