// JSON payloads of the control frames (protocol.h), shared by the daemon and the shim.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/resource_report.h"

namespace ci::runtime::proto {

struct SetupError {  // kSetupError
  std::string stage;
  int err = 0;
  std::string message;
};

struct RunRequest {  // kRun
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string cwd;
  uint32_t cpu_time_sec = 0;
  bool background = false;    // RunPayload::background
  bool serves_calls = false;  // RunPayload::serves_calls: fd 3 is a socket init keeps the peer of
  std::string call{};         // RunPayload::call (non-empty: a call, argv is not run)
};

struct Exited {  // kExited
  bool has_exit_code = false;
  int exit_code = 0;
  int signal = 0;  // 0: not signalled
  uint64_t cpu_ms = 0;
  uint64_t max_rss_kb = 0;
  bool killed = false;     // killed on the daemon's request (timeout)
  bool no_server = false;  // a call found no program serving calls
};

struct FileHeader {  // kFileBegin
  std::string path;  // relative to /workspace
  uint64_t size = 0;
};

struct CollectRequest {  // kCollect
  uint64_t max_files = 0;
  uint64_t max_total_bytes = 0;
  std::string skip_path;
  int64_t modified_after_ns = 0;  // CollectLimits::modified_after_ns
};

struct CgroupReport : ResourceReport {  // kReport
  std::string cleanup_error;            // non-empty when the cgroup could not be removed
};

std::string Encode(const SetupError& m);
std::string Encode(const RunRequest& m);
std::string Encode(const Exited& m);
std::string Encode(const FileHeader& m);
std::string Encode(const CollectRequest& m);
std::string Encode(const CgroupReport& m);
std::string EncodeError(std::string_view message);  // kError: {message}
std::string EncodeCollectDone(bool truncated);      // kCollectDone: {truncated}

// Each returns false on malformed JSON or a missing required field.
bool Decode(std::string_view text, SetupError* m);
bool Decode(std::string_view text, RunRequest* m);
bool Decode(std::string_view text, Exited* m);
bool Decode(std::string_view text, FileHeader* m);
bool Decode(std::string_view text, CollectRequest* m);
bool Decode(std::string_view text, CgroupReport* m);
bool DecodeError(std::string_view text, std::string* message);
bool DecodeCollectDone(std::string_view text, bool* truncated);

}  // namespace ci::runtime::proto
