// The daemon's handle on one local sandbox: a shim process, its two sockets and the program's
// three pipes, all driven asynchronously on one strand.
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/executor.h"
#include "runtime/daemon/recycle_bin.h"
#include "runtime/daemon/shim_spawn.h"
#include "runtime/kernel/unique_fd.h"
#include "runtime/wire/messages.h"
#include "runtime/wire/plan.h"

namespace ci::runtime {

using Strand = asio::strand<asio::any_io_executor>;

// A sandbox's cgroup counters as the daemon reads them (sandbox_recycle.cc).
struct CgroupCounts {
  uint64_t cpu_ms = 0;
  uint64_t oom_kills = 0;
  uint64_t pids_limit_hits = 0;
  uint64_t memory_peak_bytes = 0;
};

// A recyclable execution sandbox's state across its executions (sandbox_recycle.cc).
struct RecycleState {
  std::shared_ptr<RecycleBin> bin;  // null: removed after its execution
  SandboxSpec spec;                 // RecycleSpec of the spec it was made for
  std::string client;               // whose program it ran last (RunPayload::client)
  uint32_t executions = 0;          // put back so far
  CgroupCounts baseline;            // the counters when it was last put back
  std::string cgroup_name;          // found at the first recycle
  UniqueFd peak_fd;                 // v2: memory.peak, reset through this descriptor
  bool in_bin = false;              // the bin holds it: no LocalSandbox owns it
  bool report_read = false;         // SandboxCore::report is this execution's, from the cgroup
};

// Shared by the sandbox object and the helper coroutines it spawns (output pumps, deadline), so
// a late completion never touches freed state.
struct SandboxCore {
  SandboxCore(const asio::any_io_executor& ex, ShimHandles h);

  enum class State { kStarting, kReady, kRunning, kRan, kDestroyed };

  Strand strand;
  pid_t pid;           // the shim's; 0 when the fork server's zygote is the sandbox's parent
  pid_t init_pid = 0;  // then init's host pid (Msg::kInit), once started
  asio::posix::stream_descriptor lifecycle;
  asio::posix::stream_descriptor service;
  asio::posix::stream_descriptor stdin_w;
  asio::posix::stream_descriptor stdout_r;
  asio::posix::stream_descriptor stderr_r;
  asio::posix::stream_descriptor pidfd;
  State state = State::kStarting;
  bool session = false;          // serves many runs (SandboxSpec::session_expires_at)
  bool pipes_used = false;       // the program pipes above served a run: a session needs new ones
  bool prestarted = false;       // init holds a program started ahead (RunRequest::prestart)
  uint64_t prestart_cpu_ms = 0;  // its CPU before its run: not the run's, taken off the report
  bool reaped = false;
  bool teardown_detached = false;  // Destroy returned; FinishTeardown reaps the shim
  // The executor's count of teardowns still running (Executor::Drain waits for none).
  std::shared_ptr<std::atomic<int>> pending_teardowns;
  ResourceReport report;
  CgroupLayout cgroup;  // the plan's (sessions read OOM kills per call: sandbox_oom.h)
  std::optional<std::string> oom_file;   // found at the first call
  std::optional<CgroupFreezer> freezer;  // found at the first Freeze
  // Freeze(true) asked (until Freeze(false) got through): init answers nothing, so runs and the
  // other calls to it are refused, and Destroy kills instead of asking init to exit.
  bool frozen = false;
  RecycleState recycle;

  std::atomic<bool> killed{false};
  std::mutex kill_mu;  // guards lifecycle_fd against Destroy closing it under Kill()
  int lifecycle_fd;    // raw copy for Kill(), which may run on any thread

  // Sends "kill" to the shim without blocking; thread-safe.
  void SendKill();
  // The 5 s guards of the teardown (on the strand): SIGKILL for a shim that neither reports nor
  // exits; for the zygote's sandbox, init killed and the wait for the lifecycle socket ended.
  void KillParent();
};

class LocalSandbox final : public Sandbox {
 public:
  LocalSandbox(const asio::any_io_executor& ex, ShimHandles handles, const SandboxSpec& spec,
               std::shared_ptr<std::atomic<int>> pending_teardowns);
  // A recycled sandbox (RecycleBin::Take) for an execution of `spec`.
  LocalSandbox(std::shared_ptr<SandboxCore> recycled, const SandboxSpec& spec);
  ~LocalSandbox() override;

  // Sends the plan and waits for init's "ready" (or a setup error), at most `timeout`.
  asio::awaitable<Status> Start(const Plan& plan, std::chrono::milliseconds timeout);
  // Starts the spec's prestart_argv, which then waits for a Run's go.
  asio::awaitable<Status> Prestart(std::vector<std::string> argv);
  // Destroy puts the sandbox into `bin` when its init can put it back (sandbox_recycle.cc);
  // `spec`: RecycleSpec of the spec it was made for.
  void RecycleInto(std::shared_ptr<RecycleBin> bin, SandboxSpec spec) {
    core_->recycle.bin = std::move(bin);
    core_->recycle.spec = std::move(spec);
  }

  asio::awaitable<Result<RunOutcome>> Run(RunPayload payload, OutputSink sink) override;
  asio::awaitable<Result<Collection>> Collect(CollectLimits limits) override;
  asio::awaitable<ResourceReport> Destroy() override;
  asio::awaitable<Result<std::unique_ptr<SandboxProcess>>> Spawn(ProcessSpec spec) override;
  asio::awaitable<Status> Signal(uint32_t pid, int signal) override;
  asio::awaitable<Result<std::shared_ptr<InsideListener>>> ListenInside(
      uint16_t port, asio::any_io_executor serve) override;
  // The sandbox's cgroup freezer (sandbox_freeze.cc); unavailable without a cgroup of its own.
  asio::awaitable<Status> Freeze(bool frozen) override;
  void Kill() override;
  bool Alive() const override;

 private:
  std::shared_ptr<SandboxCore> core_;
  proto::RunRequest run_template_;  // env, cwd, cpu limit from the spec; argv from the payload
};

// Helpers shared by the sandbox's translation units.
Status DeadSandboxError(const SandboxCore& core, const char* during);
// Init has not ended (nothing readable on its socket: an idle init sends nothing).
bool InitAlive(const SandboxCore& core);
// New stdio pipes for the next program (a session's later runs, a recycled sandbox).
Status ReplacePipes(SandboxCore& core);
// Destroy's first step for a sandbox with a recycle bin (sandbox_recycle.cc): the execution's
// report from the cgroup, and the sandbox put back by its init into the bin. nullopt when it was
// not put back: the teardown follows (its report replaced by core.report if that was read).
asio::awaitable<std::optional<ResourceReport>> RecycleOnStrand(std::shared_ptr<SandboxCore> core);
// "<during>: the sandbox is frozen (...)": what a call to a frozen sandbox's init gets.
Status FrozenSandboxError(const char* during);
asio::awaitable<Result<RunOutcome>> RunOnStrand(std::shared_ptr<SandboxCore> core,
                                                proto::RunRequest request, RunPayload payload,
                                                OutputSink sink);
asio::awaitable<Result<Collection>> CollectOnStrand(std::shared_ptr<SandboxCore> core,
                                                    CollectLimits limits);
asio::awaitable<ResourceReport> DestroyOnStrand(std::shared_ptr<SandboxCore> core);
asio::awaitable<Status> StartOnStrand(std::shared_ptr<SandboxCore> core, std::string plan,
                                      std::chrono::milliseconds timeout);
asio::awaitable<Status> PrestartOnStrand(std::shared_ptr<SandboxCore> core,
                                         proto::RunRequest request);

// Runs `task` on the strand and hands its result back. co_spawn in Boost 1.74 needs a
// default-constructible result, which Result<T> is not, hence the optional. Callers pass a named
// awaitable: GCC 12 may destroy non-trivial temporaries of a co_await expression twice, so this
// code keeps them out of co_await expressions throughout.
template <typename T>
asio::awaitable<T> OnStrand(Strand strand, asio::awaitable<T> task) {
  std::optional<T> out;
  auto run = [&out, &task]() -> asio::awaitable<void> { out.emplace(co_await std::move(task)); };
  co_await asio::co_spawn(strand, run, asio::use_awaitable);
  co_return std::move(*out);
}

}  // namespace ci::runtime
