// The hardening profile the daemon applies to every sandbox, resolved once at startup.
#pragma once

#include <string>

#include "core/executor.h"
#include "core/status.h"
#include "daemon/config.h"

namespace ci {

// The seccomp profile text for SECCOMP_PROFILE: the embedded policies/seccomp-executor.json
// ("default"), policies/seccomp-executor-strict.json ("strict"), or the content of an absolute
// path. Compiled once to prove it loads (names this libseccomp does not know are logged at debug);
// an error names SECCOMP_PROFILE and must stop startup.
Result<std::string> LoadSeccompProfile(const Config& config);

// What every sandbox gets: the backend's own measures plus the daemon's seccomp profile (a
// downgrade when SECCOMP_LOG_DENIED lets denied calls through).
Enforcement DaemonEnforcement(const Executor& executor, const Config& config);

}  // namespace ci
