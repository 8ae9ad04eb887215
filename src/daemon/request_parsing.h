// Strict parsing of request bodies (docs/api.md "Conventions"): exact JSON types, unknown fields
// ignored, errors worded as the 422 `detail` the client sees.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ci {

struct FileRef {
  std::string path;
  std::string file_id;
};

struct ExecuteRequest {
  std::string code;
  std::optional<std::string> stdin_data;
  int64_t timeout_ms = 2000;
  bool last_line_interactive = true;
  std::vector<FileRef> files;
  std::string language = "python";
};

Result<ExecuteRequest> ParseExecuteRequest(std::string_view body, int64_t max_timeout_ms);

// POST /v1/sessions: both fields optional, an empty body too.
struct SessionCreateRequest {
  std::vector<FileRef> files;
  int64_t ttl_seconds = 900;
};
Result<SessionCreateRequest> ParseSessionCreateRequest(std::string_view body);

// POST /v1/sessions/{id}/bash
struct BashRequest {
  std::string cmd;
  int64_t timeout_ms = 30000;
};
Result<BashRequest> ParseBashRequest(std::string_view body, int64_t max_timeout_ms);

// POST /v1/sessions/{id}/files: {"files": [...]} (required).
Result<std::vector<FileRef>> ParseStageFilesRequest(std::string_view body);

}  // namespace ci
