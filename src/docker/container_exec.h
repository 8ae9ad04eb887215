// One container driven over exec (wire-protocols.md A.2-A.4): execs with hijacked streams, exit
// codes from exec inspect, demultiplexed reads, killing the sandbox's processes from a second
// exec, and the shell the sandbox runs (session kill function, run wrapper, background start).
// Shared by the sandbox and the executor of docker_executor.cc.
#pragma once

#include <rapidjson/document.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/executor.h"
#include "core/random.h"
#include "core/sleep.h"
#include "core/status.h"
#include "docker/engine_client.h"
#include "docker/stdcopy.h"

namespace ci::docker {

inline constexpr size_t kReadChunk = 64 << 10;
inline constexpr size_t kMaxErrorText = 4096;  // error and probe text kept from a stream

std::string StringArray(const std::vector<std::string>& v);  // a JSON array of strings
bool ParseObject(const std::string& body, rapidjson::Document& doc);

// Everything the sandbox's detached helpers (deadline, stdin writer, kill) need, so they never
// touch a sandbox that may already be gone.
struct Container {
  std::shared_ptr<EngineClient> client;
  asio::any_io_executor ex;
  std::string id;
  std::string user;  // "uid:gid"
  std::string cwd;
  std::vector<std::string> env;
  // A session sandbox (SandboxSpec::session_expires_at): many runs, background programs spared.
  bool session = false;
  uint32_t cpu_time_sec = 0;  // sessions: the program's RLIMIT_CPU, set by the run's wrapper
  uint32_t pids_limit = 0;
};

struct StartedExec {
  std::string exec_id;
  std::shared_ptr<RawStream> stream;
};

asio::awaitable<Result<StartedExec>> StartExec(const Container& c,
                                               const std::vector<std::string>& cmd,
                                               bool attach_stdin);
// The exit code from exec inspect; the stream can end a moment before the daemon records it.
asio::awaitable<Result<std::optional<int>>> ExecExitCode(const Container& c,
                                                         const std::string& exec_id);
// Reads a stream to its end, demultiplexing into `demux`. `stop` (may be null) is asked after
// each read whether to stop early.
asio::awaitable<Status> Pump(RawStream& stream, FrameDemuxer& demux,
                             const std::function<bool()>* stop = nullptr);

// Session shell (definitions explain them): the leftover kill function `k`, the run wrapper
// `ci-run <background pids> <cpu seconds> argv...`, the background start printing its pid.
extern const char* const kSessionKillFunction;
extern const char* const kSessionRunScript;
extern const char* const kStartBackgroundScript;

// Kills every process of the sandbox user but PID 1 from a second exec; in a session
// (`background` = the background programs' pids) those programs' sessions are spared.
asio::awaitable<Status> KillSandboxProcesses(const Container& c,
                                             const std::string* background = nullptr);

// Files that may travel in the program's exec argv instead of a tar exec (top-level, UTF-8
// without NUL, 64 KiB together): "path, content" pairs, or nullopt when they must go by tar.
std::optional<std::vector<std::string>> InlineFiles(const std::vector<StagedFile>& files);

}  // namespace ci::docker
