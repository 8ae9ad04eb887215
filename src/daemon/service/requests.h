// What a client asks for, as the service takes it: validated values, independent of the wire
// format (api/request_parsing.h parses them from the request bodies).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ci::daemon {

struct FileRef {
  std::string path;
  std::string file_id;
};

// A request's `network` (docs/egress.md): rules as given, checked by the service.
struct NetworkRequest {
  std::vector<std::string> allow_out;
  std::vector<std::string> deny_out;
};

struct ExecuteRequest {
  std::string code;
  std::optional<std::string> stdin_data;
  int64_t timeout_ms = 2000;
  bool last_line_interactive = true;
  std::vector<FileRef> files;
  std::string language = "python";
  std::optional<NetworkRequest> network;  // none: the daemon's EGRESS_ALLOW
};

// POST /v1/sessions: both fields optional, an empty body too.
struct SessionCreateRequest {
  std::vector<FileRef> files;
  int64_t ttl_seconds = 900;
  std::optional<NetworkRequest> network;  // none: the daemon's EGRESS_ALLOW
  std::optional<std::string> snapshot;    // a named snapshot (id or name) to start from
};

// POST /v1/sessions/{id}/bash
struct BashRequest {
  std::string cmd;
  int64_t timeout_ms = 30000;
};

}  // namespace ci::daemon
