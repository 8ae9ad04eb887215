// The seccomp profile the daemon gives every sandbox, resolved once at startup (here: it is
// compiled by the local runtime's compiler, whatever the backend). What is enforced
// is each backend's report (Executor::enforcement of the daemon's spec): the daemon adds nothing.
#pragma once

#include <string>

#include "core/status.h"
#include "daemon/config/config.h"

namespace ci::daemon {

// The seccomp profile text for SECCOMP_PROFILE: the embedded policies/seccomp-executor.json
// ("default"), policies/seccomp-executor-strict.json ("strict"), or the content of an absolute
// path. Compiled once to prove it loads (names this libseccomp does not know are logged at debug);
// an error names SECCOMP_PROFILE and must stop startup.
Result<std::string> LoadSeccompProfile(const Config& config);

}  // namespace ci::daemon
