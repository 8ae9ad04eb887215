// What the exec-driven sandbox (exec_sandbox.h and the pieces it uses: staging, collection, the
// counters probe, the kill, the session's interpreter) needs from the thing it runs in: execs
// with their streams and exit codes, and the few calls around them. Two implementations: a
// Docker container over the Engine API (engine_container.h) and a Kubernetes pod over the exec
// WebSocket (k8s/pod_container.h), so both backends run the same shell, wrappers and steps.
#pragma once

#include <sys/types.h>

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/inside_listener.h"
#include "core/resource_report.h"
#include "core/status.h"

namespace ci::container {

namespace asio = boost::asio;

// Where a piece of an exec's output came from. kSystemError: the engine's own message about the
// exec (Docker's stream 3), never the program's.
enum class ExecOutput { kStdout, kStderr, kSystemError };
using ExecOutputSink = std::function<void(ExecOutput, std::string_view)>;

// How an exec's stdin is used.
struct ExecStdin {
  bool attach = false;
  // The exact number of bytes the caller writes before CloseStdin (a program's stdin). A
  // transport that cannot signal the end of stdin (Kubernetes' v4 exec protocol) lets the
  // program read exactly that many and then gives it EOF; unset: the reader stops by itself (a
  // tar archive's end) or stdin never ends (a session's interpreter).
  std::optional<uint64_t> exact_size;
};

// One exec in flight.
class ExecStream {
 public:
  virtual ~ExecStream() = default;
  // Reads the next output and hands it to `sink` (in pieces, as it arrives); false once the
  // exec's output ended.
  virtual asio::awaitable<Result<bool>> Read(const ExecOutputSink& sink) = 0;
  virtual asio::awaitable<Status> WriteAll(std::string_view data) = 0;
  // The end of stdin (the program reads EOF); output keeps coming.
  virtual asio::awaitable<void> CloseStdin() = 0;
  // Closes both directions at once; a pending Read completes with an error.
  virtual void Close() = 0;
  // Known to be over already (ended, failed to start, closed) without a Read; false when it
  // cannot tell.
  virtual bool finished() const { return false; }
  // The exec's exit status once Read returned false (128+N for a death by signal N); nullopt
  // when the engine does not know it.
  virtual asio::awaitable<Result<std::optional<int>>> ExitCode() = 0;
};

// Container removals in flight: Remove does not wait for them, the executor's Drain does.
struct Removals {
  size_t in_flight = 0;
};

class ContainerApi {
 public:
  virtual ~ContainerApi() = default;
  // Starts `cmd` (looked up in PATH) as the sandbox user in the workspace, stdout and stderr
  // attached. Status::Gone when the container or pod is no longer there.
  virtual asio::awaitable<Result<std::shared_ptr<ExecStream>>> Exec(
      const std::vector<std::string>& cmd, ExecStdin stdin_use) = 0;
  // Raises the pids limit by 16 * `step` (0: restores it) so that an exec can start while a fork
  // bomb fills the limit. False when it cannot.
  virtual asio::awaitable<bool> SetPidsHeadroom(int step) = 0;
  // The sandbox's PID 1 as this host sees it, when its cgroup may be read from here (a local
  // Docker Engine); 0 otherwise.
  virtual asio::awaitable<pid_t> HostInitPid() = 0;
  // Destroy's last step, after the counters were read: adds what the engine knows (Docker's
  // OOMKilled of PID 1) to `report` and removes the container or pod (in the background; the
  // executor's Drain waits for it).
  virtual asio::awaitable<void> Remove(ResourceReport& report) = 0;
  // Kills everything at once without waiting (Sandbox::Kill); Remove still follows.
  virtual void Kill() = 0;
  // Stops every process of the container where it stands, or lets them go on (Sandbox::Freeze:
  // Docker's pause, the cgroup freezer); Kill and Remove work on a paused one. Twice is no error.
  virtual asio::awaitable<Status> Pause(bool paused) {
    (void)paused;
    co_return Status::Unavailable("freeze", "this backend's containers cannot be paused");
  }
  // The client whose files and program this container is about to get (RunPayload::client):
  // a recycled container goes back to that client only (agent_container.cc).
  virtual void Claim(const std::string& client) { (void)client; }
  // SIGKILLs every process but PID 1 and, in sessions, but the `background` sessions (a space
  // separated list of session ids, sandbox_shell.h) without starting a process (a fork bomb may
  // fill the pids limit); false when this container cannot, and an exec must do it.
  virtual bool KillAllBut(const std::string* background) {
    (void)background;
    return false;
  }
  // Writes `files` ("name, content" pairs, top-level names) into the workspace without an exec
  // (as the sandbox user, as a shell's `>` would); nullopt where this container cannot, and an
  // exec must.
  virtual asio::awaitable<std::optional<Status>> WriteFiles(
      const std::vector<std::pair<std::string, std::string>>& files) {
    (void)files;
    co_return std::nullopt;
  }
  // The container's cgroup counters read without an exec (AgentChannel::ReadCounters: the
  // in-container probe's text); nullopt where an exec must read them.
  virtual asio::awaitable<std::optional<Result<std::string>>> ReadCounters(uint8_t extras) {
    (void)extras;
    co_return std::nullopt;
  }
  // Whether the directory `dir` holds nothing but the regular file `skip_path` (the program's
  // own), told without an exec; nullopt where an exec must tell.
  virtual asio::awaitable<std::optional<bool>> HoldsNothing(const std::string& dir,
                                                            const std::string& skip_path) {
    (void)dir;
    (void)skip_path;
    co_return std::nullopt;
  }
  // Starts a `python3 -c SOURCE ARGS...` program, stdin attached, as a fork of the container's
  // fork server (SandboxSpec::zygote_argv) instead of an exec; an error where there is none.
  virtual asio::awaitable<Result<std::shared_ptr<ExecStream>>> ForkPython(
      const std::vector<std::string>& argv) {
    (void)argv;
    co_return Status::Error("no fork server in this container");
  }
  // Egress (docs/egress.md): connections the container's programs open to 127.0.0.1:`port`.
  // Only a container whose PID 1 is the agent relays them.
  virtual asio::awaitable<Result<std::shared_ptr<InsideListener>>> ListenInside(
      uint16_t port, asio::any_io_executor serve) {
    (void)port;
    (void)serve;
    co_return Status::Error(
        "egress needs the executor image's agent as the sandbox's PID 1 "
        "(PYTHON_EXECUTOR_DOCKER_AGENT, KUBERNETES_EXECUTOR_AGENT)");
  }
};

}  // namespace ci::container
