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

namespace ci::daemon {

Result<ExecuteRequest> ParseExecuteRequest(std::string_view body, int64_t max_timeout_ms);

Result<SessionCreateRequest> ParseSessionCreateRequest(std::string_view body);

Result<BashRequest> ParseBashRequest(std::string_view body, int64_t max_timeout_ms);

// POST /v1/sessions/{id}/files: {"files": [...]} (required).
Result<std::vector<FileRef>> ParseStageFilesRequest(std::string_view body);

}  // namespace ci::daemon
