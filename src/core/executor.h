// The backend interface. One execution: Prepare (sandbox up, runner waiting) -> Run (files,
// program and stdin in; output streamed out; exit status) -> Collect (workspace snapshot) ->
// Destroy (nothing left behind). Prepare and Run are separate so warm pools need no redesign.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/inside_listener.h"
#include "core/measure.h"
#include "core/resource_report.h"
#include "core/sandbox_spec.h"
#include "core/status.h"

namespace ci {

namespace asio = boost::asio;

enum class StreamKind { kStdout, kStderr };

// Called with each chunk as the program writes it. Must not block; may be called many times.
using OutputSink = std::function<void(StreamKind, std::string_view)>;
// A process's output: the next chunk is read once the sink's coroutine is done with this one, so
// a slow consumer holds the process back instead of growing a buffer.
using ProcessOutputSink = std::function<asio::awaitable<void>(StreamKind, std::string)>;

struct StagedFile {
  std::string workspace_path;  // relative, already validated ("data/in.csv")
  std::string host_path;       // where the bytes are on the daemon's side (file store data file)
  // Keeps host_path in place while any copy of this lives (the file store's pin, so a file
  // deleted through the API during staging is still staged whole).
  std::shared_ptr<const void> hold = nullptr;
};

struct RunPayload {
  std::vector<std::string> argv;            // argv[0] is looked up in PATH inside the sandbox
  std::vector<StagedFile> files;            // written into /workspace before the program starts
  std::optional<std::string> stdin_data;    // written, then stdin is closed; nullopt: EOF at once
  std::chrono::milliseconds timeout{2000};  // wall clock, from program start
  // Session sandboxes only: start the program in a session (setsid) of its own with stdio on
  // /dev/null and return as soon as it started (no exit code). It and what it starts survive
  // later Runs and their timeouts, until it exits or the sandbox ends (the persistent Python
  // interpreter of a session).
  bool background = false;
  // With `background`: the program serves calls (the persistent interpreter). It gets a channel
  // only the runtime holds (local: a socket inherited from init; docker: its exec's stdin and
  // output, held by the daemon), never a name another process of the sandbox could connect to.
  bool serves_calls = false;
  // Sessions: instead of starting argv, hand this request, the run's stdio and stdin_data to the
  // program serving calls, and wait for its answer. The runtime bounds the call from outside:
  // `timeout` (then the server and everything else in the sandbox is killed), and the sandbox's
  // CPU time since the previous run ended against the spec's cpu_time_sec (the same kill). While
  // no run is active, a server whose sandbox uses more CPU than that is killed too (a thread a
  // cell left spinning). See python_session.h for the request and the answer.
  std::optional<std::string> call{};
  // Execution sandboxes: the run's go line (ending in '\n'), written to the program's stdin ahead
  // of stdin_data. Where the spec's prestart_argv was started ahead, that program is the run's and
  // argv is not started; otherwise argv is (the same program, told the same go).
  std::optional<std::string> go{};
  // Whose request this is (an API key's name; "" without keys): a sandbox that ran one client's
  // program is never reused for another's (docker's recycled containers).
  std::string client{};
};

struct RunOutcome {
  bool timed_out = false;
  std::optional<int> exit_code;  // set when the program exited normally
  std::optional<int> signal;     // set when it was killed by a signal
  uint64_t cpu_ms = 0;           // user + system time of the program's tree
  uint64_t max_rss_kb = 0;
  uint64_t duration_ms = 0;  // wall clock of the program
  // Calls only: no program served it (none started, or it had ended): nothing ran.
  bool no_server = false;
  // Calls only: the isolation layer's OOM killer killed a process of the sandbox during it.
  bool oom_killed = false;
};

struct CollectLimits {
  std::string dest_dir;  // host directory the runtime writes collected files into (exists)
  size_t max_files = 1000;
  uint64_t max_total_bytes = 100ull << 20;
  std::string skip_path = "__main__.py";  // the entrypoint is never collected
  // Only files modified after this (unix time in ns; 0: all). A session's call collects what it
  // wrote without copying out a large workspace it left alone.
  int64_t modified_after_ns = 0;
};

struct CollectedFile {
  std::string workspace_path;  // relative, '/'-separated, hidden names kept ("a/.env")
  std::string host_path;       // inside CollectLimits::dest_dir; the caller owns it afterwards
  uint64_t size = 0;
};

struct Collection {
  std::vector<CollectedFile> files;
  bool truncated = false;  // a file was left out: a limit reached, or nested too deep to walk
};

// What the isolation layer saw, read after the sandbox is gone (cgroup events and peaks).

// A process started in a session sandbox beside its runs (E2B's processes): in a session of its
// own, spared by the runs' kills like a background program, alive until it exits or the sandbox
// ends. Its pid is the sandbox's (as `ps` inside shows it).
struct ProcessSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in the PATH of `env`
  std::vector<std::string> env;   // the whole environment ("KEY=value")
  std::string cwd;
  bool stdin = false;  // false: it reads EOF at once
  // Its session is in use while it is held (no idle pause); false for a kernel that serves
  // cells, whose cells say so themselves (SessionManager::KeepBusy).
  bool keeps_session_busy = true;
};

struct ProcessEnd {
  std::optional<int> exit_code;  // it exited
  std::optional<int> signal;     // a signal killed it
  std::string error;             // neither is known: why (the sandbox ended under it)
};

class SandboxProcess {
 public:
  virtual ~SandboxProcess() = default;
  virtual uint32_t pid() const = 0;
  // Streams its output to `sink` until it ended and its output did (output of what it left
  // behind is waited for a moment, not to its end, unless the sink holds it); once.
  virtual asio::awaitable<ProcessEnd> Wait(ProcessOutputSink sink) = 0;
  // EPIPE-like failures once it closed its stdin or ended are errors of this call only.
  virtual asio::awaitable<Status> WriteStdin(std::string data) = 0;
  virtual void CloseStdin() = 0;
};

// An execution sandbox serves one Run; a session sandbox (SandboxSpec::session_expires_at) serves
// Runs one after the other, and Collect at any point between them. When a program ends or times
// out, every process it left behind is killed; only background programs (RunPayload::background)
// and their descendants are spared. The workspace and /tmp persist between Runs.
class Sandbox {
 public:
  virtual ~Sandbox() = default;
  // Stages files, runs the program to its end or its timeout (then kills the program's whole
  // tree but keeps the sandbox so Collect still works), streaming output to `sink`. Output
  // written after the program's exit by processes it left is not waited for.
  virtual asio::awaitable<Result<RunOutcome>> Run(RunPayload payload, OutputSink sink) = 0;
  virtual asio::awaitable<Result<Collection>> Collect(CollectLimits limits) = 0;
  // Tears everything down (processes, mounts, cgroups). Safe to call at any point, twice too.
  // Returns once no process of the sandbox is left and its counters are known; the removal of
  // its cgroup or container may finish in the background (Executor::Drain waits for it).
  virtual asio::awaitable<ResourceReport> Destroy() = 0;
  // Immediate, non-blocking kill of everything (client gone, daemon shutting down). Run/Collect
  // in flight then complete with an error; Destroy must still be awaited.
  virtual void Kill() = 0;
  // Session sandboxes: starts a process (ProcessSpec) between runs, and signals its process
  // group by its pid (ok when it has already ended and was reaped: nothing to signal).
  virtual asio::awaitable<Result<std::unique_ptr<SandboxProcess>>> Spawn(ProcessSpec spec) {
    (void)spec;
    co_return Status::Error("this backend's sandboxes do not start processes");
  }
  virtual asio::awaitable<Status> Signal(uint32_t pid, int signal) {
    (void)pid, (void)signal;
    co_return Status::Error("this backend's sandboxes do not start processes");
  }
  // Egress (docs/egress.md): connections the sandbox's programs open to 127.0.0.1:`port`, for
  // the daemon's proxy to serve (as streams on `serve`), until the listener is closed. Between
  // runs.
  virtual asio::awaitable<Result<std::shared_ptr<InsideListener>>> ListenInside(
      uint16_t port, asio::any_io_executor serve) {
    (void)port;
    (void)serve;
    co_return Status::Error("egress is not available on this backend (docs/egress.md)");
  }
  // Session sandboxes, between runs: stops every process of the sandbox where it stands (the
  // cgroup freezer, the engine's pause), its timers included, or lets them go on again. Error
  // with unavailable(): this backend or host cannot (a pod; no cgroup of its own).
  virtual asio::awaitable<Status> Freeze(bool frozen) {
    (void)frozen;
    co_return Status::Unavailable("freeze", "this backend's sandboxes cannot be frozen");
  }
  // False once the sandbox is known to be gone while idle (its init exited): a warm pool then
  // replaces it instead of handing it out. Non-blocking; true when a backend cannot tell.
  virtual bool Alive() const { return true; }
};

// A figure of the backend's own for /metrics (a gauge or counter without labels).
struct BackendMetric {
  std::string name;  // code_interpreter_...
  std::string type;  // "gauge" or "counter"
  std::string help;
  double value = 0;
};

// What the backend enforces on every sandbox of a spec here, and what it cannot.
struct Enforcement {
  std::vector<Measure> enforced;  // derived from the backend's own translation of the spec
  std::vector<Downgrade> downgrades;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string_view name() const = 0;  // "local", "docker", "kubernetes"
  virtual asio::awaitable<Result<std::unique_ptr<Sandbox>>> Prepare(const SandboxSpec& spec) = 0;
  // A sandbox that ran spec.client's last program and was put back for that client's next one
  // (local: recycle_bin.h), or null when none waits. The warm pool asks first for a client with
  // an API key: its pooled sandboxes are for any client, so a keyed client would otherwise only
  // ever get its own on the pool's misses.
  virtual asio::awaitable<std::unique_ptr<Sandbox>> TakeRecycled(const SandboxSpec& spec) {
    (void)spec;
    co_return nullptr;
  }
  // A quick health probe for /health and /ready: ok, or what is wrong and how to fix it.
  virtual asio::awaitable<Status> Check() = 0;
  // How the network is isolated ("none: own network namespace, loopback only").
  virtual std::string network_isolation() const = 0;
  // What every sandbox of `spec` gets here, from the same translation Prepare runs and the host
  // facts decided at construction; cheap to call.
  virtual Enforcement enforcement(const SandboxSpec& spec) const = 0;
  // Waits for the cleanup a Destroy left running in the background (docker: container
  // removals; local: the shims' cgroup removals), so that nothing is left behind at shutdown.
  virtual asio::awaitable<void> Drain() { co_return; }
  // Whether Prepare accepts session specs (api.md: 501 otherwise).
  virtual bool supports_sessions() const { return false; }
  // Whether the sandboxes' root is this host's files (SANDBOX_ROOTFS), where the daemon can look
  // for the languages' interpreters; false: an image's root, which may hold any of them.
  virtual bool root_on_this_host() const { return true; }
  // Whether Prepare starts SandboxSpec::zygote_argv, a Python fork server inside the sandbox.
  virtual bool runs_python_fork_server() const { return false; }
  // Whether a Python program that imports no warm module (SandboxSpec::warm_imports empty) is
  // cheaper in a sandbox of its own kind, without them loaded (local: a second fork server).
  virtual bool runs_lean_python() const { return false; }
  // Whether the backend keeps the warm pool of `spec` itself, `size` sandboxes for every daemon
  // that shares the backend (kubernetes with KUBERNETES_SHARED_WARM_POOL: pods any replica
  // claims), serving the pool's spec from it in Prepare; the daemon's WarmPool then keeps none.
  virtual bool KeepSharedPool(const SandboxSpec& /*spec*/, size_t /*size*/) { return false; }
  // Its own figures for /metrics, read at each scrape (local: the fork server's).
  virtual std::vector<BackendMetric> metrics() const { return {}; }
  // What the backend does another way than configured because the host or cluster refused it
  // (kubernetes: pods/attach refused, executions driven by exec), for /health; may change.
  virtual std::vector<Downgrade> downgrades() const { return {}; }

  // Sessions that live in the backend rather than in a daemon (kubernetes: the session's pod,
  // found by label), so any replica serves them: a session another replica (or this daemon
  // before a restart) created, its sandbox attached here; nullopt when the backend has none by
  // that id. `spec` is what this daemon makes sessions of (their limits). Other backends'
  // sessions live and die with their daemon.
  struct FoundSession {
    SessionIdentity identity;
    std::unique_ptr<Sandbox> sandbox;
  };
  virtual asio::awaitable<Result<std::optional<FoundSession>>> FindSession(
      const SandboxSpec& /*spec*/, const std::string& /*id*/) {
    co_return std::nullopt;
  }
  // Every session the backend holds (for GET /v1/sessions on any replica); nullopt when its
  // sessions live in their daemon.
  virtual asio::awaitable<Result<std::optional<std::vector<SessionIdentity>>>> ListSessions() {
    co_return std::nullopt;
  }
  // Whether a session's sandbox outlives the daemon's shutdown (then shutdown leaves it to its
  // TTL and to the replicas that remain).
  virtual bool sessions_outlive_daemon() const { return false; }
};

}  // namespace ci
