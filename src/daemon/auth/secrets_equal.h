// Comparing secrets (API keys' digests, a sandbox's access token) in time that does not depend on
// where they differ, so a caller cannot find one byte by byte. Their lengths are not secret.
#pragma once

#include <string_view>

namespace ci::daemon {

bool SecretsEqual(std::string_view a, std::string_view b);

}  // namespace ci::daemon
