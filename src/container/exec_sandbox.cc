#include "container/exec_sandbox.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <csignal>
#include <cstdlib>
#include <optional>

#include "container/exec_process.h"
#include "container/interpreter_relay.h"
#include "container/sandbox_counters.h"
#include "container/sandbox_shell.h"
#include "container/staging.h"
#include "container/workspace_collect.h"

namespace ci::container {
namespace {

using namespace std::chrono_literals;
using asio::use_awaitable;
using Clock = std::chrono::steady_clock;

// After the timeout kill, how long the program's stream may take to end before it is cut.
constexpr auto kKillGrace = 5s;
// A session program's own watchdog (sandbox_shell.h ProgramExec) fires this long after the
// daemon's deadline: the daemon's kill exec goes first, the watchdog is for when it cannot start.
constexpr auto kWatchdogLag = 1s;

// Any run marks the sandbox busy: the idle CPU watch leaves it alone meanwhile, and a run's own
// CPU is not charged to the interpreter.
class BusyWhileRunning {
 public:
  BusyWhileRunning(std::shared_ptr<InterpreterRelay> s, const SandboxCounters& counters)
      : s_(std::move(s)), counters_(counters) {
    if (s_) s_->busy = true;
  }
  ~BusyWhileRunning() {
    if (!s_) return;
    s_->busy = false;
    if (counters_.host()) s_->window_start_ms = HostCpuMs(*counters_.host());
  }
  BusyWhileRunning(const BusyWhileRunning&) = delete;
  BusyWhileRunning& operator=(const BusyWhileRunning&) = delete;

 private:
  std::shared_ptr<InterpreterRelay> s_;
  const SandboxCounters& counters_;
};

// The program's exec in flight, shared with its detached stdin writer and deadline.
struct ProgramRun {
  ProgramRun(const asio::any_io_executor& ex, std::shared_ptr<ExecStream> s)
      : stream(std::move(s)), deadline(ex), kill_ended(ex) {
    kill_ended.expires_at(asio::steady_timer::time_point::max());
  }
  std::shared_ptr<ExecStream> stream;
  asio::steady_timer deadline;
  // A session's kill exec in flight: the run ends after it (cancelled when it ends), since the
  // program's stream ends at its first kills while its later passes would hit the next run.
  asio::steady_timer kill_ended;
  bool killing = false;
  bool done = false;
  bool timed_out = false;
  bool sandbox_killed = false;  // the kill exec did not end it: the engine killed everything
};

// stdin: written whole, then half-closed so the program sees EOF.
asio::awaitable<void> WriteProgramStdin(std::shared_ptr<ProgramRun> run,
                                        std::optional<std::string> input) {
  if (input && !input->empty()) {
    Status w = co_await run->stream->WriteAll(*input);
    if (!w.ok()) spdlog::debug("stdin: {}", w.message());  // the program quit reading
  }
  co_await run->stream->CloseStdin();
}

asio::awaitable<void> KillFromAnExec(Container c, std::string background) {
  const std::string* spared = c.session ? &background : nullptr;
  Status k = co_await KillSandboxProcesses(c, spared);
  if (!k.ok()) spdlog::warn("{}: {}", c.short_id(), k.message());
}

// The deadline (armed by the caller): kill the program's processes from a second exec (sparing
// a session's `background` programs), then cut the stream if it still has not ended. An
// execution's kill exec is not waited for: a fork bomb filling the pids limit can hold it up
// for as long as no pid is free, and the grace then ends with the sandbox killed whole. A
// session's is (a late one would hit the next call's programs).
asio::awaitable<void> KillAtDeadline(std::shared_ptr<ProgramRun> run, Container c,
                                     std::string background) {
  boost::system::error_code ec;
  co_await run->deadline.async_wait(asio::redirect_error(use_awaitable, ec));
  if (ec || run->done) co_return;
  run->timed_out = true;
  if (c.session) {
    run->killing = true;
    co_await KillFromAnExec(c, std::move(background));
    run->killing = false;
    run->kill_ended.cancel();
  } else {
    asio::co_spawn(c.ex, KillFromAnExec(c, ""), asio::detached);
  }
  if (run->done) co_return;
  run->deadline.expires_after(kKillGrace);
  co_await run->deadline.async_wait(asio::redirect_error(use_awaitable, ec));
  if (ec || run->done) co_return;
  run->stream->Close();
  // The kill exec did not end the program (it could not start: a fork bomb fills the pids
  // limit). An execution's sandbox has nothing else to keep: the engine kills it whole (a
  // session's is kept for its background programs).
  if (!c.session) {
    spdlog::warn("{}: the program outlived its kill; killing the sandbox", c.short_id());
    run->sandbox_killed = true;
    c.api->Kill();
  }
}

// How the program's stream went: its output went to the sink, the Engine's own errors here.
struct ProgramStream {
  Status read;
  bool system_error = false;
  std::string system_text;
};

asio::awaitable<ProgramStream> StreamToSink(ExecStream& stream, const OutputSink& sink) {
  ProgramStream out;
  ExecOutputSink to_sink = [&](ExecOutput s, std::string_view bytes) {
    if (s == ExecOutput::kSystemError) {
      out.system_error = true;
      if (out.system_text.size() < kMaxErrorText) out.system_text.append(bytes);
      return;
    }
    sink(s == ExecOutput::kStderr ? StreamKind::kStderr : StreamKind::kStdout, bytes);
  };
  out.read = co_await Pump(stream, to_sink);
  co_return out;
}

Status FrozenError(const char* during) {
  return Status::Error(std::string(during) +
                       ": the sandbox is frozen (Sandbox::Freeze); thaw it first");
}

// How a call ended (ServeCall).
enum class CallEnd { kAnswered, kDied, kTimedOut, kCpu };

class ExecSandbox final : public Sandbox {
 public:
  ExecSandbox(Container c, bool host_cgroups) : c_(c), counters_(std::move(c), host_cgroups) {}

  // The program started ahead (c_.prestart_argv) under the execution's wrapper, its stdin held
  // open for the go; a failure to start it only means runs start their own.
  asio::awaitable<void> Prestart() {
    if (c_.prestart_argv.empty()) co_return;
    if (c_.zygote) {
      auto forked = co_await c_.api->ForkPython(c_.prestart_argv);
      if (forked.ok()) {
        prestarted_ = *forked;
        prestarted_forked_ = true;
        co_return;
      }
      spdlog::debug("{}: not forked by the fork server ({}); started instead", c_.short_id(),
                    forked.status().message());
    }
    const std::vector<std::string> argv =
        ProgramArgv({c_.prestart_argv, {}, false, "", c_.cpu_time_sec, c_.run_limits});
    const ExecStdin open_stdin{true, std::nullopt};  // named: GCC 12 (check_coroutines.py)
    auto started = co_await c_.api->Exec(argv, open_stdin);
    if (!started.ok()) {
      spdlog::warn("{}: the program could not start ahead: {}", c_.short_id(),
                   started.status().message());
      co_return;
    }
    prestarted_ = *started;
  }

  asio::awaitable<Result<RunOutcome>> Run(RunPayload payload, OutputSink sink) override {
    if (killed_) co_return Status::Error("sandbox killed");
    if (frozen_) co_return FrozenError("run");
    if (payload.background && !c_.session) {
      co_return Status::Error("run: background programs need a session sandbox");
    }
    if (payload.call && !c_.session) co_return Status::Error("run: calls need a session sandbox");
    c_.api->Claim(payload.client);
    BusyWhileRunning busy(server_, counters_);
    if (payload.call) co_return co_await ServeCall(std::move(payload), std::move(sink));
    if (payload.background) co_return co_await StartBackground(payload);
    co_return co_await RunProgram(std::move(payload), std::move(sink));
  }

  asio::awaitable<Result<std::unique_ptr<SandboxProcess>>> Spawn(ProcessSpec spec) override {
    if (killed_) co_return Status::Error("sandbox killed");
    if (frozen_) co_return FrozenError("process start");
    if (!c_.session) co_return Status::Error("processes need a session sandbox");
    auto started = co_await StartExecProcess(c_, std::move(spec));
    if (started.ok()) background_.push_back((*started)->pid());  // spared by the runs' kills
    co_return started;
  }

  asio::awaitable<Status> Signal(uint32_t pid, int signal) override {
    if (killed_) co_return Status::Error("sandbox killed");
    if (frozen_) co_return FrozenError("signal");
    CaptureOptions o;
    o.hold = Hold();
    auto sent = co_await CaptureExec(c_, SignalArgv(pid, signal), o);
    if (!sent.ok()) co_return sent.status().Context("signalling the process");
    co_return sent->read;
  }

  asio::awaitable<Result<std::shared_ptr<InsideListener>>> ListenInside(
      uint16_t port, asio::any_io_executor serve) override {
    if (killed_) co_return Status::Error("sandbox killed");
    if (frozen_) co_return FrozenError("egress listen");
    co_return co_await c_.api->ListenInside(port, std::move(serve));
  }

  asio::awaitable<Result<Collection>> Collect(CollectLimits limits) override {
    if (killed_) co_return Status::Error("sandbox killed");
    if (frozen_) co_return FrozenError("collect");
    if (killed_whole_) co_return Collection{{}, true};  // its files went with it
    if (counters_.host() && WorkspaceHoldsNothing(counters_.init_pid(), c_.cwd, limits.skip_path)) {
      co_return Collection{};
    }
    if (!counters_.host()) {
      std::optional<bool> nothing = co_await c_.api->HoldsNothing(c_.cwd, limits.skip_path);
      if (nothing.value_or(false)) co_return Collection{};
    }
    co_return co_await CollectWorkspace(c_, limits, Hold());
  }

  asio::awaitable<ResourceReport> Destroy() override {
    if (destroyed_) co_return report();
    destroyed_ = true;
    auto t0 = Clock::now();
    if (active_) active_->Close();
    if (prestarted_) prestarted_->Close();
    if (server_) server_->stream->Close();
    if (frozen_ && !counters_.host() && !killed_) {
      // The counters' probe is an exec, which a paused container refuses.
      Status thawed = co_await c_.api->Pause(false);
      frozen_ = !thawed.ok();
    }
    // The engines flag an OOM kill only when PID 1 dies of it, never for an exec'd program, and
    // have no pids event: the cgroup's own counters tell. Read from the host they cost nothing,
    // so read them again (anything since Run); through an exec only when Run did not get them.
    if (!killed_ && !killed_whole_ && (counters_.host() || !counters_.read_once())) {
      co_await counters_.Read(false);
    }
    // The removal runs after the answer: the executor's Drain waits for it at shutdown, the
    // reaper removes what a failure or a crash left.
    co_await c_.api->Remove(report());
    spdlog::debug("{}: destroy: probe+inspect {} ms", c_.short_id(), (Clock::now() - t0) / 1ms);
    co_return report();
  }

  // Session sandboxes between runs: the engine's pause. Execution containers are not paused
  // (one could be recycled paused).
  asio::awaitable<Status> Freeze(bool frozen) override {
    const char* what = frozen ? "freeze" : "thaw";
    if (killed_ || destroyed_) co_return Status::Error(std::string(what) + ": sandbox killed");
    if (!c_.session) co_return Status::Error(std::string(what) + ": not a session sandbox");
    if (active_) co_return Status::Error(std::string(what) + ": the sandbox is busy with a run");
    const bool before = frozen_;
    frozen_ = true;  // refused meanwhile (and after, when it is paused)
    Status s = co_await c_.api->Pause(frozen);
    frozen_ = s.ok() ? frozen : before;
    co_return s;
  }

  void Kill() override {
    if (killed_ || destroyed_) return;
    killed_ = true;
    if (active_) active_->Close();
    if (server_) server_->stream->Close();
    c_.api->Kill();
  }

 private:
  ResourceReport& report() { return counters_.report(); }
  ExecHold Hold() { return {&active_, &killed_}; }

  // A session's background program, or (serves_calls) its interpreter.
  asio::awaitable<Result<RunOutcome>> StartBackground(const RunPayload& payload) {
    Status staged = co_await StageFiles(c_, payload.files, Hold());
    if (!staged.ok()) co_return staged.Context("staging files");
    if (payload.serves_calls) co_return co_await StartCallServer(payload.argv);
    if (killed_) co_return Status::Error("sandbox killed");
    co_return co_await RunBackground(payload.argv);
  }

  // The program in the foreground: its files staged, then one exec under the run wrapper
  // (sandbox_shell.h) with its stdin and deadline, its output streamed to `sink`; then its exit
  // status and the counters.
  asio::awaitable<Result<RunOutcome>> RunProgram(RunPayload payload, OutputSink sink) {
    const auto t_stage = Clock::now();
    // The go goes in front of stdin (RunPayload::go), to the program started ahead or a new one.
    if (payload.go) payload.stdin_data = *payload.go + payload.stdin_data.value_or("");
    std::shared_ptr<ExecStream> prestarted = std::exchange(prestarted_, nullptr);
    // The program started ahead is this run's when the run is the same program: its argv is the
    // run's followed by the warm imports (python_program.h PythonPrestartArgv).
    const bool same_program =
        payload.argv.size() <= c_.prestart_argv.size() &&
        std::equal(payload.argv.begin(), payload.argv.end(), c_.prestart_argv.begin());
    const bool resume = prestarted && payload.go && same_program && !prestarted->finished();
    if (prestarted && !resume) prestarted->Close();  // the new program's wrapper kills it
    // Not started ahead (a pool miss): a Python program is still forked where a fork server is,
    // which the exec path's wrapper would kill.
    const bool fork = !resume && c_.zygote && payload.argv.size() >= 3 &&
                      payload.argv[0] == "python3" && payload.argv[1] == "-c";
    auto inline_files = co_await StageForProgram(payload.files, resume || fork);
    if (!inline_files.ok()) co_return inline_files.status().NotStarted();
    const auto t0 = Clock::now();
    const std::string background = BackgroundList(background_);
    Result<std::shared_ptr<ExecStream>> started = prestarted;
    bool forked = resume && prestarted_forked_;
    if (fork) {
      started = co_await c_.api->ForkPython(payload.argv);
      forked = started.ok();
      if (!forked) {
        spdlog::debug("{}: not forked by the fork server ({}); started instead", c_.short_id(),
                      started.status().message());
      }
    }
    if (!resume && !forked) {
      const uint32_t watchdog_ms =
          c_.session ? static_cast<uint32_t>((payload.timeout + kWatchdogLag) / 1ms) : 0;
      const std::vector<std::string> argv = ProgramArgv({.program = payload.argv,
                                                         .inline_files = std::move(*inline_files),
                                                         .session = c_.session,
                                                         .background = background,
                                                         .cpu_time_sec = c_.cpu_time_sec,
                                                         .limits = c_.run_limits,
                                                         .watchdog_ms = watchdog_ms});
      const uint64_t stdin_size = payload.stdin_data ? payload.stdin_data->size() : 0;
      const ExecStdin program_stdin{true, stdin_size};
      started = co_await c_.api->Exec(argv, program_stdin);
    }
    if (!started.ok()) co_return started.status().Context("starting the program").NotStarted();
    auto run = std::make_shared<ProgramRun>(c_.ex, *started);
    active_ = run->stream;
    asio::co_spawn(c_.ex, WriteProgramStdin(run, std::move(payload.stdin_data)), asio::detached);
    run->deadline.expires_after(payload.timeout);
    asio::co_spawn(c_.ex, KillAtDeadline(run, c_, background), asio::detached);
    ProgramStream streamed = co_await StreamToSink(*run->stream, sink);
    if (run->killing) {
      boost::system::error_code ec;
      co_await run->kill_ended.async_wait(asio::redirect_error(use_awaitable, ec));
    }
    run->done = true;
    run->deadline.cancel();
    run->stream->Close();
    active_.reset();
    RunOutcome out;
    out.duration_ms = static_cast<uint64_t>((Clock::now() - t0) / 1ms);
    out.timed_out = run->timed_out;
    if (killed_) co_return Status::Error("sandbox killed");
    if (!streamed.read.ok() && !run->timed_out) co_return streamed.read;
    if (streamed.system_error) co_return Status::Error("exec failed: " + streamed.system_text);
    auto t_ended = Clock::now();
    auto code = co_await run->stream->ExitCode();
    if (!code.ok()) co_return code.status();
    auto t_inspected = Clock::now();
    SetExitStatus(*code, out);
    if (out.timed_out) {
      out.exit_code.reset();
      if (!out.signal) out.signal = SIGKILL;
    }
    if (run->sandbox_killed) {
      killed_whole_ = true;  // what it left cannot be reached by exec any more
    } else {
      // A program forked by the fork server: the agent killed what it left (sparing the server)
      // before it reported the exit.
      co_await AddProgramCounters(out, !forked);
    }
    spdlog::debug("{}: stage {} ms, exec+stream {} ms, inspect {} ms, counters {} ms",
                  c_.short_id(), (t0 - t_stage) / 1ms, (t_ended - t0) / 1ms,
                  (t_inspected - t_ended) / 1ms, (Clock::now() - t_inspected) / 1ms);
    co_return out;
  }

  // Small files (the code) travel in the program's exec (returned as "path, content" pairs), or
  // before a program started ahead or forked (`own_exec`) in a frame to the agent, else in an exec
  // of their own; others by a tar exec first.
  asio::awaitable<Result<std::vector<std::string>>> StageForProgram(
      const std::vector<StagedFile>& files, bool own_exec = false) {
    if (own_exec && files.empty()) co_return std::vector<std::string>{};
    if (auto inline_files = InlineFiles(files)) {
      if (!own_exec) co_return std::move(*inline_files);
      std::vector<std::pair<std::string, std::string>> pairs;
      for (size_t i = 0; i + 1 < inline_files->size(); i += 2) {
        pairs.emplace_back((*inline_files)[i], (*inline_files)[i + 1]);
      }
      // The agent writes them itself where there is one: no exec.
      std::optional<Status> written_by_agent = co_await c_.api->WriteFiles(pairs);
      if (written_by_agent) {
        if (!written_by_agent->ok()) co_return written_by_agent->Context("staging files");
        co_return std::vector<std::string>{};
      }
      CaptureOptions o;
      o.output_cap = kMaxErrorText;
      o.hold = Hold();
      auto written = co_await CaptureExec(c_, InlineFilesArgv(":", *inline_files), o);
      if (!written.ok()) co_return written.status().Context("staging files");
      if (!written->read.ok()) co_return written->read.Context("staging files");
      if (!written->exit_code.ok() || !written->exit_code->has_value() ||
          **written->exit_code != 0) {
        co_return Status::Error("staging files: " + written->output);
      }
      co_return std::vector<std::string>{};
    }
    Status staged = co_await StageFiles(c_, files, Hold());
    if (!staged.ok()) co_return staged.Context("staging files");
    if (killed_) co_return Status::Error("sandbox killed");
    co_return std::vector<std::string>{};
  }

  // Like local: nothing of the program outlives its run; then the cgroup's counters. A session's
  // wrapper has killed the leftovers already (sparing background programs); its counters are
  // the container's since its start: the run's CPU time is the difference.
  asio::awaitable<void> AddProgramCounters(RunOutcome& out, bool kill_leftovers = true) {
    uint64_t cpu_before = report().cpu_ms;
    co_await counters_.Read(kill_leftovers && !c_.session);
    out.cpu_ms = report().cpu_ms;
    if (c_.session) out.cpu_ms = report().cpu_ms > cpu_before ? report().cpu_ms - cpu_before : 0;
    if (server_) server_->window_start_ms = counters_.processes_cpu_ms();  // not idle CPU
    out.max_rss_kb = report().memory_peak_bytes >> 10;
  }

  // Session only: opens the channel to the interpreter (python_session.cc) through a relay exec
  // of our own, whose stdin and output only the daemon holds: the relay starts the interpreter
  // (`argv` is its program) or attaches to the one already there, started by another replica or
  // by this one before its relay broke. Returns false when `attach_only` and none is there.
  asio::awaitable<Result<bool>> OpenChannel(bool attach_only) {
    auto t0 = Clock::now();
    if (server_) co_await EndCallServer();
    std::vector<std::string> argv = server_argv_;
    argv.push_back("channel");
    if (attach_only) argv.push_back("attach");
    const ExecStdin calls{true, std::nullopt};  // never closed: framed requests
    auto started = co_await c_.api->Exec(WithRunLimits(c_.run_limits, argv), calls);
    if (!started.ok()) co_return started.status().Context("starting the interpreter's relay");
    auto s = std::make_shared<InterpreterRelay>(c_.ex);
    s->stream = *started;
    asio::co_spawn(c_.ex, PumpInterpreterRelay(s), asio::detached);
    // The token goes only to a relay that said it is non-dumpable (no process of the sandbox
    // can read it from the relay's stdin).
    while (s->head_lines() < 1 && s->alive && Clock::now() - t0 < 30s)
      co_await AwaitNews(*s, 250ms);
    if (s->head == "ready\n") {
      Status sent = co_await s->stream->WriteAll(c_.call_token + "\n");
      if (!sent.ok()) spdlog::debug("{}: relay: {}", c_.short_id(), sent.message());
      while (!s->started && s->alive && Clock::now() - t0 < 30s) co_await AwaitNews(*s, 250ms);
    }
    const std::string said = s->head.substr(s->head.find('\n') + 1);
    if (s->started && said == "none\n") {
      s->stream->Close();
      co_return false;
    }
    const size_t space = said.find(' ');
    const std::string kind = said.substr(0, space);
    char* end = nullptr;
    long pid = space == std::string::npos ? 0 : std::strtol(said.c_str() + space + 1, &end, 10);
    if (!s->started || (kind != "new" && kind != "attached") || pid <= 1 || *end != '\n') {
      s->stream->Close();
      co_return Status::Error("starting the interpreter: its relay said " + s->head);
    }
    s->pid = pid;
    co_await counters_.Read(false);
    s->window_start_ms = counters_.processes_cpu_ms();
    server_ = s;
    if (counters_.host() && c_.cpu_time_sec > 0) {
      asio::co_spawn(c_.ex,
                     WatchIdleCpu(s, *counters_.host(), counters_.init_pid(), c_.id,
                                  uint64_t{c_.cpu_time_sec} * 1000),
                     asio::detached);
    }
    spdlog::debug("{}: interpreter {} ({}) in {} ms", c_.short_id(), pid, kind,
                  (Clock::now() - t0) / 1ms);
    co_return true;
  }

  asio::awaitable<Result<RunOutcome>> StartCallServer(const std::vector<std::string>& argv) {
    auto t0 = Clock::now();
    server_argv_ = argv;
    auto opened = co_await OpenChannel(false);
    if (!opened.ok()) co_return opened.status();
    RunOutcome out;
    out.duration_ms = static_cast<uint64_t>((Clock::now() - t0) / 1ms);
    co_return out;
  }

  // Kills everything but PID 1 (the interpreter with it) and forgets the interpreter.
  asio::awaitable<void> EndCallServer() {
    auto s = std::move(server_);
    server_.reset();
    if (!s) co_return;
    if (s->alive) {
      const auto& host = counters_.host();
      bool killed = host && KillHostCgroupProcesses(*host, counters_.init_pid(), c_.id);
      if (!killed) {
        Status k = co_await KillSandboxProcesses(c_, nullptr);
        if (!k.ok()) spdlog::warn("{}: {}", c_.short_id(), k.message());
      }
      auto t0 = Clock::now();
      while (s->alive && Clock::now() - t0 < kKillGrace) co_await AwaitNews(*s, 100ms);
      s->stream->Close();
    }
    s->sink = nullptr;
  }

  // A call (RunPayload::call): request, stdin and nonce on the interpreter's stdin; its output
  // to `sink` up to the end marker. Bounded from outside: the timeout, and the container's CPU
  // during the call (and idle since the last call) against the CPU limit.
  asio::awaitable<Result<RunOutcome>> ServeCall(RunPayload payload, OutputSink sink) {
    RunOutcome out;
    if (server_ && !server_->alive) co_await EndCallServer();  // its relay is gone, maybe not it
    if (!server_ && !server_argv_.empty()) {
      auto attached = co_await OpenChannel(true);
      if (!attached.ok()) co_return attached.status();
    }
    auto s = server_;
    if (!s) {
      out.no_server = true;
      co_return out;
    }
    Status staged = co_await StageFiles(c_, payload.files, Hold());
    if (!staged.ok()) co_return staged.Context("staging files");
    const uint64_t limit_ms = uint64_t{c_.cpu_time_sec} * 1000;
    co_await counters_.Read(false);
    const uint64_t cpu_now = counters_.processes_cpu_ms();
    if (cpu_now > s->window_start_ms) {
      s->idle_ms += cpu_now - s->window_start_ms;
      spdlog::debug("{}: {} ms of CPU between calls, {} ms since the interpreter started",
                    c_.short_id(), cpu_now - s->window_start_ms, s->idle_ms);
    }
    if (limit_ms > 0 && s->idle_ms > limit_ms) {  // burnt it while no call ran
      co_await EndCallServer();
      out.no_server = true;
      co_return out;
    }
    const uint64_t cpu_start = report().cpu_ms, oom_start = counters_.oom_kills();
    const std::string nonce = RandomHex(16);
    for (auto& o : s->out) o.Begin(nonce);
    s->sink = sink;
    const std::string frame = CallFrame(*payload.call, payload.stdin_data.value_or(""), nonce);
    auto t0 = Clock::now();
    Status written = co_await s->stream->WriteAll(frame);
    if (!written.ok()) spdlog::debug("{}: call: {}", c_.short_id(), written.message());
    CallEnd end = co_await AwaitCallEnd(*s, t0 + payload.timeout, cpu_start, limit_ms);
    s->sink = nullptr;
    if (killed_) co_return Status::Error("sandbox killed");
    co_return co_await FinishCall(*s, end, cpu_start, oom_start, t0);
  }

  // Waits for the call's end markers, the interpreter's death, the deadline or the CPU limit
  // (the counters read every 250 ms from the host, every second by exec).
  asio::awaitable<CallEnd> AwaitCallEnd(InterpreterRelay& s, Clock::time_point deadline,
                                        uint64_t cpu_start, uint64_t limit_ms) {
    const auto poll = counters_.host() ? Clock::duration(250ms) : Clock::duration(1s);
    auto next_counters = Clock::now() + poll;  // ServeCall read them just before
    for (;;) {
      if (s.out[0].ended() && s.out[1].ended()) co_return CallEnd::kAnswered;
      if (!s.alive || killed_) co_return CallEnd::kDied;
      auto now = Clock::now();
      if (now >= deadline) co_return CallEnd::kTimedOut;
      if (now >= next_counters) {
        co_await counters_.Read(false);
        next_counters = Clock::now() + poll;
        uint64_t cpu_ms = report().cpu_ms > cpu_start ? report().cpu_ms - cpu_start : 0;
        if (limit_ms > 0 && cpu_ms >= limit_ms) co_return CallEnd::kCpu;
      }
      co_await AwaitNews(s, std::min<Clock::duration>(poll, deadline - now));
    }
  }

  // The call's outcome; the interpreter is ended unless it answered.
  asio::awaitable<RunOutcome> FinishCall(InterpreterRelay& s, CallEnd end, uint64_t cpu_start,
                                         uint64_t oom_start, Clock::time_point t0) {
    RunOutcome out;
    std::optional<int> code;
    if (end == CallEnd::kDied) {
      auto c = co_await s.stream->ExitCode();
      if (c.ok()) code = *c;
    }
    if (end != CallEnd::kAnswered) co_await EndCallServer();
    co_await counters_.Read(false);
    out.cpu_ms = report().cpu_ms > cpu_start ? report().cpu_ms - cpu_start : 0;
    out.oom_killed = counters_.oom_kills() > oom_start;
    out.max_rss_kb = report().memory_peak_bytes >> 10;  // the container's peak so far
    out.duration_ms = static_cast<uint64_t>((Clock::now() - t0) / 1ms);
    s.window_start_ms = counters_.processes_cpu_ms();
    switch (end) {
      case CallEnd::kAnswered:
        if (s.out[1].flags() & 1) {
          out.timed_out = true;  // interrupted at its timeout, the state survives
        } else {
          out.exit_code = s.out[1].status();
        }
        break;
      case CallEnd::kTimedOut:
        out.timed_out = true;
        break;
      case CallEnd::kCpu:
        out.signal = SIGKILL;  // with cpu_ms past the limit: the cpu_limit verdict
        break;
      case CallEnd::kDied:
        SetExitStatus(code, out);
        if (!code) out.signal = SIGKILL;
        break;
    }
    co_return out;
  }

  // Session only: starts the program in a session of its own with stdio on /dev/null and returns
  // once it runs (no exit code); its session is spared by the kills of later runs.
  asio::awaitable<Result<RunOutcome>> RunBackground(const std::vector<std::string>& program) {
    auto t0 = Clock::now();
    const std::vector<std::string> argv =
        BackgroundStartArgv(WithRunLimits(c_.run_limits, program));
    CaptureOptions no_exit_code;
    no_exit_code.inspect_exit = false;
    no_exit_code.hold = Hold();
    auto started = co_await CaptureExec(c_, argv, no_exit_code);
    if (!started.ok()) co_return started.status().Context("starting the background program");
    if (killed_) co_return Status::Error("sandbox killed");
    if (!started->read.ok()) co_return started->read.Context("starting the background program");
    const std::string& text = started->output;
    char* end = nullptr;
    long pid = std::strtol(text.c_str(), &end, 10);
    if (pid <= 1 || end == nullptr || (*end != '\n' && *end != '\0')) {
      co_return Status::Error("starting the background program: " + text);
    }
    background_.push_back(pid);
    RunOutcome out;
    out.duration_ms = static_cast<uint64_t>((Clock::now() - t0) / 1ms);
    co_return out;
  }

  Container c_;
  SandboxCounters counters_;
  std::shared_ptr<ExecStream> prestarted_;
  bool prestarted_forked_ = false;  // by the fork server (ContainerApi::ForkPython)
  std::shared_ptr<ExecStream> active_;
  std::vector<long> background_;  // sessions: pids (= session ids) of background programs
  std::shared_ptr<InterpreterRelay> server_;  // sessions: the relay to the interpreter, if any
  std::vector<std::string> server_argv_;      // sessions: the interpreter's program, once started
  bool killed_ = false;
  bool frozen_ = false;        // paused (Freeze), or being paused or unpaused: runs are refused
  bool killed_whole_ = false;  // by the engine, after a program outlived its kill exec
  bool destroyed_ = false;
};

}  // namespace

std::unique_ptr<Sandbox> MakeExecSandbox(Container c, bool host_cgroups) {
  return std::make_unique<ExecSandbox>(std::move(c), host_cgroups);
}

asio::awaitable<std::unique_ptr<Sandbox>> MakePrestartedExecSandbox(Container c,
                                                                    bool host_cgroups) {
  auto sandbox = std::make_unique<ExecSandbox>(std::move(c), host_cgroups);
  co_await sandbox->Prestart();  // (an empty argv would be the wrapper's kill alone)
  co_return std::move(sandbox);
}

}  // namespace ci::container
