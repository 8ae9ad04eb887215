// What a sandbox's cgroup tells when it ends (or while it runs): the one set of counters every
// backend and the shim's report carry.
#pragma once

#include <cstdint>

namespace ci {

struct ResourceReport {
  bool oom_killed = false;      // memory limit hit and a process was killed
  bool pids_limit_hit = false;  // a fork/clone was refused by the pids limit
  uint64_t memory_peak_bytes = 0;
  uint64_t cpu_ms = 0;  // whole sandbox, from the cgroup when available (0: no cpu accounting)
};

}  // namespace ci
