// One container or pod driven over exec (container_api.h): its output read to the end, one exec
// run to its end for its output (CaptureExec), and killing the sandbox's processes from a second
// exec. What the execs run is in sandbox_shell.h. Shared by the sandbox's pieces: exec_sandbox.cc,
// staging.cc, sandbox_counters.cc, workspace_collect.cc.
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

#include "container/cgroup_probe.h"
#include "container/container_api.h"
#include "core/executor.h"
#include "core/random.h"
#include "core/sleep.h"
#include "core/status.h"

namespace ci::container {

inline constexpr size_t kReadChunk = 64 << 10;
inline constexpr size_t kMaxErrorText = 4096;  // error and probe text kept from a stream

std::string StringArray(const std::vector<std::string>& v);  // a JSON array of strings
bool ParseObject(const std::string& body, rapidjson::Document& doc);

// Everything the sandbox's detached helpers (deadline, stdin writer, kill) need, so they never
// touch a sandbox that may already be gone.
struct Container {
  std::shared_ptr<ContainerApi> api;
  asio::any_io_executor ex;
  std::string id;   // for logs: the container id or the pod name
  std::string cwd;  // the workspace
  // A session sandbox (SandboxSpec::session_expires_at): many runs, background programs spared.
  bool session = false;
  uint32_t cpu_time_sec = 0;  // sessions: the program's RLIMIT_CPU, set by the run's wrapper
  // The kernel quotas the programs' wrappers set (sandbox_shell.h RunLimitsScript), where the
  // engine cannot (a pod); empty: the engine sets them (docker's ulimits).
  std::string run_limits;
  // Sessions: the secret a relay proves to the interpreter (python_session.cc), hex.
  std::string call_token;
  // A recycled container's counters when this sandbox's execution began.
  CountersBaseline baseline;
  // Execution sandboxes (SandboxSpec::prestart_argv): the program started at Prepare, waiting
  // for its go line on stdin; empty: none.
  std::vector<std::string> prestart_argv;
  // The container runs a fork server (SandboxSpec::zygote_argv): the program started ahead is
  // forked from it (ContainerApi::ForkPython), or exec'd when that fails.
  bool zygote = false;
  std::string short_id() const { return id.substr(0, 12); }
};

// Reads an exec's output to its end into `sink`. `stop` (may be null) is asked after each read
// whether to stop early.
asio::awaitable<Status> Pump(ExecStream& stream, const ExecOutputSink& sink,
                             const std::function<bool()>* stop = nullptr);

// A sandbox's hold on its exec in flight: Sandbox::Kill closes the stream in `active` and sets
// `killed` (both may be null: nothing to hold).
struct ExecHold {
  std::shared_ptr<ExecStream>* active = nullptr;
  const bool* killed = nullptr;
  bool Killed() const { return killed != nullptr && *killed; }
};

// What one exec run to its end gave.
struct ExecCapture {
  std::string output;  // what it printed (stdout only with CaptureOptions::stdout_only), capped
  Status read;         // how reading its stream ended
  Status input;        // how writing its stdin ended (CaptureOptions::write_input)
  Result<std::optional<int>> exit_code = std::optional<int>();  // inspected unless told not to
};

struct CaptureOptions {
  size_t output_cap = kMaxErrorText;
  bool stdout_only = false;
  bool inspect_exit = true;  // not when the sandbox was killed meanwhile (ExecHold::killed)
  // Writes the exec's stdin (attached only when set); it is half-closed after.
  std::function<asio::awaitable<Status>(ExecStream&)> write_input;
  ExecHold hold;
};

// Creates an exec of `cmd`, starts it, writes its stdin, reads its output (capped) to the end,
// closes it and inspects its exit code. An error means it did not start.
asio::awaitable<Result<ExecCapture>> CaptureExec(const Container& c,
                                                 const std::vector<std::string>& cmd,
                                                 CaptureOptions o = {});

// Kills every process of the sandbox user but PID 1 from a second exec; in a session
// (`background` = the background programs' pids) those programs' sessions are spared.
asio::awaitable<Status> KillSandboxProcesses(const Container& c,
                                             const std::string* background = nullptr);

}  // namespace ci::container
