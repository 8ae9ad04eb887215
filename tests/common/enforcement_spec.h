// The spec both backends' enforcement tests report on and then probe: every limit set to a value
// no default has, so a probe that reads a default cannot pass by chance.
#pragma once

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

}  // namespace ci::testing_support
