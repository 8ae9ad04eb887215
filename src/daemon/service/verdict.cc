#include "daemon/service/verdict.h"

#include <csignal>

namespace ci::daemon {

std::string_view ComputeVerdict(const RunOutcome& run, const ResourceReport& resources,
                                bool output_truncated, uint32_t cpu_limit_sec) {
  // An OOM kill always counts, even when the program survived it (a child was killed): it
  // changed what the program did. A refused fork killed nothing, so it only explains failures.
  if (resources.oom_killed) return "memory_limit";
  bool success = !run.timed_out && run.exit_code == 0;
  if (success) return output_truncated ? "output_limit" : "ok";
  if (resources.pids_limit_hit) return "pids_limit";
  if (run.timed_out) return "timed_out";
  // RLIMIT_CPU sends SIGXCPU at the soft limit and SIGKILL at the hard one (soft + 1 s).
  if (run.signal == SIGXCPU ||
      (run.signal == SIGKILL && run.cpu_ms >= uint64_t{cpu_limit_sec} * 1000)) {
    return "cpu_limit";
  }
  if (output_truncated) return "output_limit";
  if (run.signal.has_value()) return "killed";
  return "error";
}

}  // namespace ci::daemon
