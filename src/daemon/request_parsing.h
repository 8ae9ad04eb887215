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

}  // namespace ci
