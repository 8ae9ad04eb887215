#include "daemon/service/verdict.h"

#include <csignal>

namespace ci::daemon {

std::string_view VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kOk:
      return "ok";
    case Verdict::kOutputLimit:
      return "output_limit";
    case Verdict::kMemoryLimit:
      return "memory_limit";
    case Verdict::kPidsLimit:
      return "pids_limit";
    case Verdict::kTimedOut:
      return "timed_out";
    case Verdict::kCpuLimit:
      return "cpu_limit";
    case Verdict::kKilled:
      return "killed";
    case Verdict::kError:
      return "error";
  }
  return "error";
}

Verdict ComputeVerdict(const RunOutcome& run, const ResourceReport& resources,
                       bool output_truncated, uint32_t cpu_limit_sec) {
  // A refused fork killed nothing, so it only explains failures; and it comes first there: a
  // runaway spawner's memory is its processes (page tables, stacks, kernel objects, copied
  // pages, freed late while they churn), so an OOM kill next to it is its consequence. Otherwise
  // an OOM kill always counts, even when the program survived it (a child was killed): it
  // changed what the program did.
  bool success = !run.timed_out && run.exit_code == 0;
  if (!success && resources.pids_limit_hit) return Verdict::kPidsLimit;
  if (resources.oom_killed) return Verdict::kMemoryLimit;
  if (success) return output_truncated ? Verdict::kOutputLimit : Verdict::kOk;
  if (run.timed_out) return Verdict::kTimedOut;
  // RLIMIT_CPU sends SIGXCPU at the soft limit and SIGKILL at the hard one (soft + 1 s).
  if (run.signal == SIGXCPU ||
      (run.signal == SIGKILL && run.cpu_ms >= uint64_t{cpu_limit_sec} * 1000)) {
    return Verdict::kCpuLimit;
  }
  if (output_truncated) return Verdict::kOutputLimit;
  if (run.signal.has_value()) return Verdict::kKilled;
  return Verdict::kError;
}

}  // namespace ci::daemon
