// JSON payloads of the control frames (protocol.h), shared by the daemon and the shim. Each
// message lists its fields once (Fields, core/json.h); Encode and Decode both walk that list.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/resource_report.h"

namespace ci::runtime::proto {

struct SetupError {  // kSetupError
  std::string stage;
  int err = 0;
  std::string message;
};
template <typename V, json::Message<SetupError> M>
void Fields(V& v, M& m) {
  v("stage", m.stage);
  v("errno", m.err);
  v("message", m.message);
}

struct RunRequest {  // kRun
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string cwd;
  uint32_t cpu_time_sec = 0;
  bool background = false;    // RunPayload::background
  bool serves_calls = false;  // RunPayload::serves_calls: fd 3 is a socket init keeps the peer of
  std::string call{};         // RunPayload::call (non-empty: a call, argv is not run)
  // Execution sandboxes: start argv now and answer kStarted without waiting for it; it waits on
  // its stdin for the run's go line (SandboxSpec::prestart_argv).
  bool prestart = false;
  // The run of the program started by a prestart request (argv empty): kStarted, then as usual.
  bool resume = false;
};
template <typename V, json::Message<RunRequest> M>
void Fields(V& v, M& m) {
  v("argv", m.argv);
  v("env", m.env);
  v("cwd", m.cwd);
  v("cpu_time_sec", m.cpu_time_sec);
  v("background", m.background);
  v("serves_calls", m.serves_calls);
  v("call", m.call);
  v("prestart", m.prestart);
  v("resume", m.resume);
}

struct Exited {  // kExited
  bool has_exit_code = false;
  int exit_code = 0;
  int signal = 0;  // 0: not signalled
  uint64_t cpu_ms = 0;
  uint64_t max_rss_kb = 0;
  bool killed = false;     // killed on the daemon's request (timeout)
  bool no_server = false;  // a call found no program serving calls
};
template <typename V, json::Message<Exited> M>
void Fields(V& v, M& m) {
  v("has_exit_code", m.has_exit_code);
  v("exit_code", m.exit_code);
  v("signal", m.signal);
  v("cpu_ms", m.cpu_ms);
  v("max_rss_kb", m.max_rss_kb);
  v("killed", m.killed);
  v("no_server", m.no_server);
}

struct Started {               // kStarted answering a resume (the other kStarted frames are empty)
  uint64_t cpu_before_ms = 0;  // CPU the pre-started program used before its run (not the run's)
};
template <typename V, json::Message<Started> M>
void Fields(V& v, M& m) {
  v("cpu_before_ms", m.cpu_before_ms);
}

struct Spawned {         // kSpawned
  uint32_t pid = 0;      // in the sandbox's pid namespace; 0: it did not start, for `why`
  std::string why{};     // no such directory, or the fork's error
  bool no_room = false;  // the fork failed for the sandbox's process limit (EAGAIN)
};
template <typename V, json::Message<Spawned> M>
void Fields(V& v, M& m) {
  v("pid", m.pid);
  v("why", m.why);
  v("no_room", m.no_room);
}

struct SignalRequest {  // kSignal
  uint32_t pid = 0;
  int signal = 0;
};
template <typename V, json::Message<SignalRequest> M>
void Fields(V& v, M& m) {
  v("pid", m.pid);
  v("signal", m.signal);
}

struct FileHeader {  // kFileBegin
  std::string path;  // relative to /workspace
  uint64_t size = 0;
};
template <typename V, json::Message<FileHeader> M>
void Fields(V& v, M& m) {
  v("path", m.path);
  v("size", m.size);
}

struct CollectRequest {  // kCollect
  uint64_t max_files = 0;
  uint64_t max_total_bytes = 0;
  std::string skip_path;
  int64_t modified_after_ns = 0;  // CollectLimits::modified_after_ns
};
template <typename V, json::Message<CollectRequest> M>
void Fields(V& v, M& m) {
  v("max_files", m.max_files);
  v("max_total_bytes", m.max_total_bytes);
  v("skip_path", m.skip_path);
  v("modified_after_ns", m.modified_after_ns);
}

struct CgroupReport : ResourceReport {};  // kReport, sent before the cgroup's removal
template <typename V, json::Message<CgroupReport> M>
void Fields(V& v, M& m) {
  v("oom_killed", m.oom_killed);
  v("pids_limit_hit", m.pids_limit_hit);
  v("memory_peak_bytes", m.memory_peak_bytes);
  v("cpu_ms", m.cpu_ms);
}

struct ErrorMessage {  // kError
  std::string message;
};
template <typename V, json::Message<ErrorMessage> M>
void Fields(V& v, M& m) {
  v("message", m.message);
}

struct CollectDone {  // kCollectDone
  bool truncated = false;
};
template <typename V, json::Message<CollectDone> M>
void Fields(V& v, M& m) {
  v("truncated", m.truncated);
}

template <typename M>
std::string Encode(const M& m) {
  return json::Encode(m);
}
// False on malformed JSON or a missing field.
template <typename M>
bool Decode(std::string_view text, M* m) {
  return json::Decode(text, m);
}
// A run request names a program or a call.
bool Decode(std::string_view text, RunRequest* m);

inline std::string EncodeError(std::string_view message) {
  return Encode(ErrorMessage{std::string(message)});
}
inline bool DecodeError(std::string_view text, std::string* message) {
  ErrorMessage m;
  if (!Decode(text, &m)) return false;
  *message = std::move(m.message);
  return true;
}
inline std::string EncodeCollectDone(bool truncated) { return Encode(CollectDone{truncated}); }
inline bool DecodeCollectDone(std::string_view text, bool* truncated) {
  CollectDone m;
  if (!Decode(text, &m)) return false;
  *truncated = m.truncated;
  return true;
}

}  // namespace ci::runtime::proto
