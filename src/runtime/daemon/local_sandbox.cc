// LocalSandbox lifecycle: start (plan -> ready), kill, destroy (report, reap, close).
#include "runtime/daemon/local_sandbox.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstring>
#include <thread>

#include "runtime/daemon/frame_io.h"

namespace ci::runtime {
namespace {

using proto::Msg;
using namespace std::chrono_literals;

Status SetupErrorStatus(const std::string& payload) {
  proto::SetupError e;
  if (!proto::Decode(payload, &e)) return Status::Error("sandbox setup failed (malformed report)");
  std::string msg = "sandbox setup failed at stage '" + e.stage + "': " + e.message;
  if (e.err != 0) msg += (e.message.empty() ? "" : ": ") + std::string(std::strerror(e.err));
  return Status::Error(msg);
}

}  // namespace

SandboxCore::SandboxCore(const asio::any_io_executor& ex, ShimHandles h)
    : strand(asio::make_strand(ex)),
      pid(h.pid),
      lifecycle(strand, h.lifecycle.release()),
      service(strand, h.service.release()),
      stdin_w(strand, h.stdin_w.release()),
      stdout_r(strand, h.stdout_r.release()),
      stderr_r(strand, h.stderr_r.release()),
      pidfd(strand),
      lifecycle_fd(lifecycle.native_handle()) {
  if (h.pidfd.valid()) pidfd.assign(h.pidfd.release());
}

void SandboxCore::KillParent() {
  if (pid > 0) {
    ::kill(pid, SIGKILL);
    return;
  }
  // The zygote's sandbox: init is killed, and with it its pid namespace (the zygote then
  // reports, removes the cgroup and closes the lifecycle socket); the wait for that ends here, so
  // a hung zygote cannot hold the teardown.
  if (init_pid > 0) ::kill(init_pid, SIGKILL);
  boost::system::error_code ignored;
  lifecycle.cancel(ignored);
}

void SandboxCore::SendKill() {
  std::lock_guard<std::mutex> lock(kill_mu);
  if (lifecycle_fd < 0) return;
  unsigned char frame[proto::kHeaderSize];
  proto::EncodeHeader(Msg::kKill, 0, frame);
  // MSG_DONTWAIT: Kill() must never block; a 5-byte frame fits unless the shim is long gone.
  (void)::send(lifecycle_fd, frame, sizeof frame, MSG_DONTWAIT | MSG_NOSIGNAL);
}

Status DeadSandboxError(const SandboxCore& core, const char* during) {
  if (core.killed) return Status::Error(std::string("sandbox killed during ") + during);
  return Status::Gone(std::string("sandbox died during ") + during +
                      " (init exited; see the daemon log for the shim's messages)");
}

Status FrozenSandboxError(const char* during) {
  return Status::Error(std::string(during) +
                       ": the sandbox is frozen (Sandbox::Freeze); thaw it first");
}

LocalSandbox::LocalSandbox(const asio::any_io_executor& ex, ShimHandles handles,
                           const SandboxSpec& spec,
                           std::shared_ptr<std::atomic<int>> pending_teardowns)
    : core_(std::make_shared<SandboxCore>(ex, std::move(handles))) {
  core_->pending_teardowns = std::move(pending_teardowns);
  run_template_.env = spec.env.empty() ? DefaultSandboxEnv() : spec.env;
  run_template_.cwd = spec.cwd;
  run_template_.cpu_time_sec = spec.limits.cpu_time_sec;
  core_->session = spec.session_expires_at != 0;
}

LocalSandbox::LocalSandbox(std::shared_ptr<SandboxCore> recycled, const SandboxSpec& spec)
    : core_(std::move(recycled)) {
  core_->recycle.in_bin = false;
  run_template_.env = spec.env.empty() ? DefaultSandboxEnv() : spec.env;
  run_template_.cwd = spec.cwd;
  run_template_.cpu_time_sec = spec.limits.cpu_time_sec;
}

LocalSandbox::~LocalSandbox() {
  // Done, finishing (FinishTeardown), or waiting in the recycle bin.
  if (core_->reaped || core_->teardown_detached || core_->recycle.in_bin) return;
  // Destroy() was never awaited: the shim cleans up by itself on "kill"; a thread reaps it so no
  // zombie is left behind. Not a path the daemon should take normally.
  Kill();
  pid_t pid = core_->pid;
  if (pid <= 0) return;  // the zygote is the parent: it cleans up on the lifecycle socket's EOF
  std::thread([pid] {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }).detach();
}

asio::awaitable<Status> LocalSandbox::Start(const Plan& plan, std::chrono::milliseconds timeout) {
  core_->cgroup = plan.cgroup;
  auto task = StartOnStrand(core_, EncodePlan(plan), timeout);
  co_return co_await OnStrand<Status>(core_->strand, std::move(task));
}

asio::awaitable<Status> StartOnStrand(std::shared_ptr<SandboxCore> core, std::string plan,
                                      std::chrono::milliseconds timeout) {
  if (Status s = co_await WriteFrameAsync(core->lifecycle, Msg::kPlan, plan); !s.ok()) {
    co_return s.Context("sandbox setup failed: sending the plan to the shim");
  }
  auto answered = std::make_shared<bool>(false);
  auto timed_out = std::make_shared<bool>(false);
  asio::steady_timer watchdog(core->strand, timeout);
  watchdog.async_wait([core, answered, timed_out](boost::system::error_code ec) {
    if (ec || *answered) return;
    *timed_out = true;
    boost::system::error_code ignored;
    core->service.cancel(ignored);
  });
  Result<Frame> frame = co_await ReadFrameAsync(core->service);
  *answered = true;
  watchdog.cancel();
  if (*timed_out) {
    co_return Status::Error("sandbox setup timed out after " + std::to_string(timeout.count()) +
                            " ms without a ready signal from the shim");
  }
  if (!frame.ok()) co_return frame.status().Context("sandbox setup failed");
  if (frame->eof) {
    co_return Status::Error(
        "sandbox setup failed: the shim exited without a report (see the daemon log)");
  }
  if (frame->type == Msg::kSetupError) co_return SetupErrorStatus(frame->payload);
  if (frame->type != Msg::kReady) {
    co_return Status::Error(std::string("sandbox setup failed: unexpected ") +
                            proto::MsgName(frame->type) + " from the shim");
  }
  if (core->pid == 0) {  // the zygote's sandbox: init's host pid comes on the lifecycle socket
    Result<Frame> init = co_await ReadFrameAsync(core->lifecycle);
    if (!init.ok() || init->eof || init->type != Msg::kInit) {
      co_return Status::Error("sandbox setup failed: the fork server did not name init");
    }
    core->init_pid = static_cast<pid_t>(std::atol(init->payload.c_str()));
  }
  core->state = SandboxCore::State::kReady;
  co_return Status();
}

asio::awaitable<Status> LocalSandbox::Prestart(std::vector<std::string> argv) {
  proto::RunRequest request = run_template_;
  request.argv = std::move(argv);
  request.prestart = true;
  auto task = PrestartOnStrand(core_, std::move(request));
  co_return co_await OnStrand<Status>(core_->strand, std::move(task));
}

asio::awaitable<Status> PrestartOnStrand(std::shared_ptr<SandboxCore> core,
                                         proto::RunRequest request) {
  const std::string encoded = proto::Encode(request);
  if (Status s = co_await WriteFrameAsync(core->service, Msg::kRun, encoded); !s.ok()) {
    co_return DeadSandboxError(*core, "prestart");
  }
  Result<Frame> started = co_await ReadFrameAsync(core->service);
  if (!started.ok() || started->eof) co_return DeadSandboxError(*core, "prestart");
  if (started->type == Msg::kError) {
    std::string message;
    proto::DecodeError(started->payload, &message);
    co_return Status::Error("pre-starting " + request.argv[0] + ": " + message);
  }
  if (started->type != Msg::kStarted) co_return Status::Error("prestart: unexpected reply");
  core->prestarted = true;
  co_return Status();
}

asio::awaitable<Result<RunOutcome>> LocalSandbox::Run(RunPayload payload, OutputSink sink) {
  auto task = RunOnStrand(core_, run_template_, std::move(payload), std::move(sink));
  co_return co_await OnStrand<Result<RunOutcome>>(core_->strand, std::move(task));
}

asio::awaitable<Result<Collection>> LocalSandbox::Collect(CollectLimits limits) {
  auto task = CollectOnStrand(core_, std::move(limits));
  co_return co_await OnStrand<Result<Collection>>(core_->strand, std::move(task));
}

asio::awaitable<ResourceReport> LocalSandbox::Destroy() {
  auto task = DestroyOnStrand(core_);
  co_return co_await OnStrand<ResourceReport>(core_->strand, std::move(task));
}

bool LocalSandbox::Alive() const { return InitAlive(*core_); }

bool InitAlive(const SandboxCore& core) {
  // An idle init sends nothing: anything readable on its socket is its end (EOF), or an error.
  struct pollfd p = {const_cast<SandboxCore&>(core).service.native_handle(), POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return true;
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return false;
  char byte;
  return ::recv(p.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) != 0;
}

void LocalSandbox::Kill() {
  auto core = core_;
  core->killed = true;
  core->SendKill();
  // Pending reads of init's messages and the stdin write end at once; the output pipes reach EOF
  // by themselves when the pid namespace dies.
  asio::post(core->strand, [core] {
    boost::system::error_code ignored;
    core->service.cancel(ignored);
    core->stdin_w.cancel(ignored);
  });
}

namespace {

// After the report: the shim removes the cgroup and exits. Reaped here, in the background;
// the executor's Drain waits for every one (pending_teardowns).
asio::awaitable<void> FinishTeardown(std::shared_ptr<SandboxCore> core) {
  // A shim that neither exits nor reports within 5 s is killed outright (its cgroup may leak
  // then; the log says so).
  asio::steady_timer guard(core->strand, 5s);
  guard.async_wait([core](boost::system::error_code e) {
    if (e || core->reaped) return;
    core->KillParent();
  });
  boost::system::error_code ec;
  for (;;) {
    Result<Frame> frame = co_await ReadFrameAsync(core->lifecycle);
    if (!frame.ok() || frame->eof) break;
  }
  if (core->pidfd.is_open()) {  // a shim: reaped here
    co_await core->pidfd.async_wait(asio::posix::stream_descriptor::wait_read,
                                    asio::redirect_error(asio::use_awaitable, ec));
    while (::waitpid(core->pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  core->reaped = true;
  guard.cancel();
  {
    std::lock_guard<std::mutex> lock(core->kill_mu);
    core->lifecycle_fd = -1;
    core->lifecycle.close(ec);
  }
  for (auto* sd :
       {&core->service, &core->stdin_w, &core->stdout_r, &core->stderr_r, &core->pidfd}) {
    sd->close(ec);
  }
  if (core->pending_teardowns) --*core->pending_teardowns;
}

}  // namespace

asio::awaitable<ResourceReport> DestroyOnStrand(std::shared_ptr<SandboxCore> core) {
  if (core->state == SandboxCore::State::kDestroyed) co_return core->report;
  if (core->recycle.bin) {
    std::optional<ResourceReport> recycled = co_await RecycleOnStrand(core);
    if (recycled) co_return *recycled;
  }
  const bool report_read = core->recycle.report_read;  // the shim's would be since the start
  core->state = SandboxCore::State::kDestroyed;
  if (core->frozen) {
    // A frozen init reads nothing: the parent kills it and thaws the cgroup
    // (Cgroup::ThawForKill), so no process of the sandbox runs again.
    core->SendKill();
  } else if (!core->killed && core->service.is_open()) {
    // Init exits, the pid namespace dies with it; the shim then reports and cleans up.
    (void)co_await WriteFrameAsync(core->service, Msg::kExit);
  }
  // The report comes once init and everything in the sandbox are gone (5 s at most, or the
  // shim is killed); the cgroup's removal and the shim's exit follow in the background.
  asio::steady_timer guard(core->strand, 5s);
  guard.async_wait([core](boost::system::error_code e) {
    if (e || core->reaped) return;
    core->KillParent();
  });
  for (;;) {
    Result<Frame> frame = co_await ReadFrameAsync(core->lifecycle);
    if (!frame.ok() || frame->eof) break;
    if (frame->type != Msg::kReport) continue;
    proto::CgroupReport r;
    if (!report_read && proto::Decode(frame->payload, &r)) {
      core->report = r;
      core->report.cpu_ms -= std::min(core->report.cpu_ms, core->prestart_cpu_ms);
    }
    break;
  }
  guard.cancel();
  if (core->pending_teardowns) ++*core->pending_teardowns;
  core->teardown_detached = true;
  asio::co_spawn(core->strand, FinishTeardown(core), asio::detached);
  co_return core->report;
}

}  // namespace ci::runtime
