// envd's file operations run in an E2B sandbox (docs/e2b.md "Files"): envd_files.py, started as
// one of the sandbox's processes as its user, answers one JSON line ({"ok": ...} or {"error":
// {"code", "message"}}) and, for a read, the file's bytes after it. What a path or a symlink
// names is resolved inside the sandbox, under its user's permissions.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "daemon/e2b/process_table.h"

namespace ci::daemon::e2b {

// The home of the sandbox's user `user`, where processes start and relative paths begin.
inline constexpr std::string_view kHome = "/home/user";

// The sandbox a file request is for.
struct FileContext {
  SessionManager* sessions = nullptr;
  std::string sandbox;
  std::string client;
  std::vector<std::string> env;
};

// Why an answer is an error when the helper says the disk is full (HTTP 507).
inline constexpr std::string_view kNoSpace = "no_space";

// Starts `envd_files.py ARGS...` in the sandbox.
boost::asio::awaitable<std::variant<std::unique_ptr<SandboxProcess>, RpcError>> StartFileHelper(
    const FileContext& c, std::vector<std::string> args, bool stdin);

// The helper's answer line: its "ok" value as JSON text, or its error.
std::variant<std::string, RpcError> ParseFileAnswer(std::string_view line);

// Waits for a started helper's end and returns its answer (output past `max_bytes` is an error).
boost::asio::awaitable<std::variant<std::string, RpcError>> FinishFileHelper(SandboxProcess& helper,
                                                                             size_t max_bytes);

// StartFileHelper and FinishFileHelper, for the operations that only answer.
boost::asio::awaitable<std::variant<std::string, RpcError>> RunFileHelper(
    const FileContext& c, std::vector<std::string> args, size_t max_bytes = 16 << 20);

}  // namespace ci::daemon::e2b
