// The session interpreter's state calls (session_server.py "dump" and "load"): its globals
// written to a file in the sandbox and read back by a new interpreter, each answered by one JSON
// line on the call's stdout saying what was kept and what was lost (docs/sessions.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ci::daemon {

// RunPayload::call of a dump or a load ("dump" | "load") of the file at `path` in the sandbox.
std::string PythonStateRequest(std::string_view op, std::string_view path, int64_t timeout_ms);

struct PythonStateReport {
  std::vector<std::string> kept;
  std::vector<std::pair<std::string, std::string>> lost;  // name, why
  uint64_t bytes = 0;
  std::string error;  // the file could not be read (a load): nothing was restored
};
// The last non-empty line of the call's stdout.
Result<PythonStateReport> ParsePythonStateReport(std::string_view stdout_text);

}  // namespace ci::daemon
