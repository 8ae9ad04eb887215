// Strict parsing of request bodies (docs/api.md "Conventions"): exact JSON types, unknown fields
// ignored, errors worded as the 422 `detail` the client sees.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "daemon/service/requests.h"
#include "daemon/tools/solve_loop.h"

namespace ci::daemon {

Result<ExecuteRequest> ParseExecuteRequest(std::string_view body, int64_t max_timeout_ms);

Result<SessionCreateRequest> ParseSessionCreateRequest(std::string_view body);

Result<BashRequest> ParseBashRequest(std::string_view body, int64_t max_timeout_ms);

// A body of which nothing is read (POST /v1/sessions/{id}/resume): empty, or a JSON object.
Status ParseIgnoredBody(std::string_view body);
// POST /v1/sessions/{id}/pause: {"memory": bool} (default true); an empty body is {}.
Result<bool> ParsePauseRequest(std::string_view body);
// POST /v1/sessions/{id}/fork: {"count": 1..16 (default 1), "ttl_seconds": 1..86400 (default: the
// session's time left)}.
struct ForkRequest {
  uint32_t count = 1;
  int64_t ttl_seconds = 0;
};
Result<ForkRequest> ParseForkRequest(std::string_view body);
// POST /v1/sessions/{id}/snapshots: {"name": up to 128 characters} (optional).
Result<std::string> ParseSnapshotRequest(std::string_view body);

// POST /v1/sessions/{id}/files: {"files": [...]} (required).
Result<std::vector<FileRef>> ParseStageFilesRequest(std::string_view body);

// POST /v1/agent/solve: {"task"} (required, not empty), "language", "max_attempts" (1..10),
// "timeout_ms" (each run; default DefaultSolveTimeoutMs of the language).
Result<SolveRequest> ParseSolveRequest(std::string_view body, int64_t max_timeout_ms);

}  // namespace ci::daemon
