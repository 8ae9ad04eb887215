// The typed verdict of one execution (docs/api.md "Verdicts").
#pragma once

#include <cstdint>
#include <string_view>

#include "core/executor.h"

namespace ci {

// An OOM kill anywhere in the sandbox is `memory_limit`. Otherwise success keeps `ok` (or
// `output_limit` when output was capped), and a failure is named by its most specific cause: a
// limit that was hit explains a crash or a timeout better than the symptom.
std::string_view ComputeVerdict(const RunOutcome& run, const ResourceReport& resources,
                                bool output_truncated, uint32_t cpu_limit_sec);

}  // namespace ci
