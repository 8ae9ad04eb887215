// spdlog setup: plain or JSON lines on stderr. Request-scoped lines start with "[<request id>] ";
// the JSON formatter lifts that into a "request_id" field.
#pragma once

#include <string>

namespace ci {

void SetupLogging(const std::string& level, const std::string& format);

// A short random id for one request ("r-3f9a1c2b7d4e").
std::string NewRequestId();

}  // namespace ci
