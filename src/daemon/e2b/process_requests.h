// The process.Process requests as envd's clients send them (proto3 JSON: docs/e2b.md
// "Processes"), parsed into values; a malformed one is an error naming the field.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "daemon/e2b/process_table.h"

namespace ci::daemon::e2b {

struct StartRequest {
  ProcessConfig config;
  std::optional<std::string> tag;
  bool stdin = false;
  bool pty = false;
};
Result<StartRequest> ParseStartRequest(std::string_view json);

// List's: an object (its fields are ignored).
Status CheckListRequest(std::string_view json);

// Connect's, CloseStdin's: {"process": {"pid": N} | {"tag": "..."}}.
Result<ProcessSelector> ParseSelectorRequest(std::string_view json);

struct InputRequest {
  ProcessSelector which;
  std::string bytes;
  bool pty = false;  // the input is for a PTY
};
Result<InputRequest> ParseInputRequest(std::string_view json);

struct SignalRequest {
  ProcessSelector which;
  int signal = 0;  // SIGTERM or SIGKILL
};
Result<SignalRequest> ParseSignalRequest(std::string_view json);

// The user an `Authorization: Basic base64(user:)` header names; nullopt when there is none.
// An error when it is not Basic or not base64.
Result<std::optional<std::string>> BasicAuthUser(std::optional<std::string_view> header);

// The one user of these sandboxes (docs/e2b.md "Sandboxes").
inline constexpr std::string_view kUser = "user";
// Why a request's Authorization is refused (malformed: invalid_argument; another user than
// kUser: permission_denied); nullopt when it names kUser or no one.
std::optional<RpcError> RefusedUser(std::optional<std::string_view> header);

}  // namespace ci::daemon::e2b
