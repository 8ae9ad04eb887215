// The typed verdict of one execution (docs/api.md "Verdicts").
#pragma once

#include <cstdint>
#include <string_view>

#include "core/executor.h"

namespace ci::daemon {

enum class Verdict {
  kOk,
  kOutputLimit,  // output was capped (and nothing more specific explains a failure)
  kMemoryLimit,
  kPidsLimit,
  kTimedOut,
  kCpuLimit,
  kKilled,  // by a signal no limit explains
  kError,   // a non-zero exit
};
// The API's name: "ok", "output_limit", "memory_limit", ...
std::string_view VerdictName(Verdict verdict);

// An OOM kill anywhere in the sandbox is `memory_limit`. Otherwise success keeps `ok` (or
// `output_limit` when output was capped), and a failure is named by its most specific cause: a
// limit that was hit explains a crash or a timeout better than the symptom.
Verdict ComputeVerdict(const RunOutcome& run, const ResourceReport& resources,
                       bool output_truncated, uint32_t cpu_limit_sec);

}  // namespace ci::daemon
