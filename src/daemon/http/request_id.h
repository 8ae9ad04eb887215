// The id of one HTTP request, echoed as X-Request-Id and prefixed to its log lines
// ("[r-3f9a1c2b7d4e] ...", which the JSON log format lifts into a "request_id" field).
#pragma once

#include <string>

#include "core/random.h"

namespace ci::daemon {

inline std::string NewRequestId() {
  std::string hex = RandomHex(6);
  return "r-" + (hex.empty() ? std::string("unknown") : hex);
}

}  // namespace ci::daemon
