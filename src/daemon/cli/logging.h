// spdlog setup: plain or JSON lines on stderr. Request-scoped lines start with "[<request id>] ";
// the JSON formatter lifts that into a "request_id" field.
#pragma once

#include <string>

namespace ci::daemon {

void SetupLogging(const std::string& level, const std::string& format);

}  // namespace ci::daemon
