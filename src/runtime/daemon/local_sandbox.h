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
#include "runtime/daemon/shim_spawn.h"
#include "runtime/wire/messages.h"
#include "runtime/wire/plan.h"

namespace ci::runtime {

using Strand = asio::strand<asio::any_io_executor>;

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
  ~LocalSandbox() override;

  // Sends the plan and waits for init's "ready" (or a setup error), at most `timeout`.
  asio::awaitable<Status> Start(const Plan& plan, std::chrono::milliseconds timeout);
  // Starts the spec's prestart_argv, which then waits for a Run's go.
  asio::awaitable<Status> Prestart(std::vector<std::string> argv);

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
