// LocalSandbox::Run: stage files, start the program, pump stdin/stdout/stderr, enforce the wall
// clock deadline, and wait for init's exit report plus EOF on both output pipes.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <vector>

#include "runtime/daemon/frame_io.h"
#include "runtime/daemon/local_sandbox.h"
#include "runtime/daemon/sandbox_oom.h"

namespace ci::runtime {
namespace {

using proto::Msg;
using Clock = std::chrono::steady_clock;

// What the helper coroutines of one run share with the waiting Run.
struct RunState {
  explicit RunState(const Strand& s) : event(s), deadline(s), drain(s) {}
  asio::steady_timer event;  // never expires: cancel() is the "something finished" signal
  asio::steady_timer deadline;
  asio::steady_timer drain;  // after the exit report: how long output EOF is waited for
  bool stdout_done = false, stderr_done = false, exit_done = false;
  std::optional<proto::Exited> exited;
  Clock::time_point exited_at;
  bool forced_kill = false;  // init did not answer the timeout's kill in time
  void Notify() { event.cancel(); }
  bool Finished() const { return stdout_done && stderr_done && exit_done; }
};

// A failed write to init means it is gone (DeadSandboxError); a failed read is the store's.
asio::awaitable<Status> SendFile(SandboxCore& core, const StagedFile& file) {
  UniqueFd fd(::open(file.host_path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0) co_return Status::Errno(file.host_path, errno);
  proto::FileHeader header{file.workspace_path, static_cast<uint64_t>(st.st_size)};
  const std::string encoded = proto::Encode(header);
  if (Status s = co_await WriteFrameAsync(core.service, Msg::kFileBegin, encoded); !s.ok()) {
    co_return DeadSandboxError(core, "staging");
  }
  std::vector<char> buf(proto::kChunkSize);
  for (;;) {
    // A blocking read of a local file (the file store's disk): bounded, 64 KiB at a time.
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) co_return Status::Errno("reading " + file.host_path, errno);
    if (n == 0) break;
    if (Status s = co_await WriteFrameAsync(core.service, Msg::kFileChunk,
                                            std::string_view(buf.data(), static_cast<size_t>(n)));
        !s.ok()) {
      co_return DeadSandboxError(core, "staging");
    }
  }
  if (Status s = co_await WriteFrameAsync(core.service, Msg::kFileEnd); !s.ok()) {
    co_return DeadSandboxError(core, "staging");
  }
  co_return Status();
}

asio::awaitable<void> PumpOutput(std::shared_ptr<SandboxCore> core, std::shared_ptr<RunState> st,
                                 StreamKind kind, OutputSink sink) {
  auto& pipe = kind == StreamKind::kStdout ? core->stdout_r : core->stderr_r;
  std::vector<char> buf(64 << 10);  // memory stays flat however much the program prints
  for (;;) {
    boost::system::error_code ec;
    size_t n = co_await pipe.async_read_some(asio::buffer(buf),
                                             asio::redirect_error(asio::use_awaitable, ec));
    if (n > 0) sink(kind, std::string_view(buf.data(), n));
    if (ec) break;  // eof, or cancelled by Kill/Destroy
  }
  (kind == StreamKind::kStdout ? st->stdout_done : st->stderr_done) = true;
  st->Notify();
}

asio::awaitable<void> FeedStdin(std::shared_ptr<SandboxCore> core,
                                std::optional<std::string> data) {
  boost::system::error_code ec;
  if (data && !data->empty()) {
    // EPIPE when the program exits without reading everything: not an error of the run.
    co_await asio::async_write(core->stdin_w, asio::buffer(*data),
                               asio::redirect_error(asio::use_awaitable, ec));
  }
  core->stdin_w.close(ec);  // the program sees EOF
}

asio::awaitable<void> AwaitExit(std::shared_ptr<SandboxCore> core, std::shared_ptr<RunState> st) {
  for (;;) {
    Result<Frame> frame = co_await ReadFrameAsync(core->service);
    if (!frame.ok() || frame->eof) break;  // the sandbox died or was killed
    proto::Exited exited;
    if (frame->type == Msg::kExited && proto::Decode(frame->payload, &exited)) {
      st->exited = exited;
      st->exited_at = Clock::now();
      break;
    }
  }
  st->exit_done = true;
  st->deadline.cancel();
  st->Notify();
}

asio::awaitable<void> EnforceDeadline(std::shared_ptr<SandboxCore> core,
                                      std::shared_ptr<RunState> st,
                                      std::chrono::milliseconds timeout) {
  boost::system::error_code ec;
  st->deadline.expires_after(timeout);
  co_await st->deadline.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  if (ec || st->exit_done) co_return;
  // Init kills every process but itself and reports; the sandbox stays up for Collect.
  (void)co_await WriteFrameAsync(core->service, Msg::kKillProgram);
  st->deadline.expires_after(std::chrono::seconds(1));
  co_await st->deadline.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  if (ec || st->exit_done) co_return;
  st->forced_kill = true;
  core->killed = true;
  core->SendKill();  // init is wedged: the whole sandbox goes
}

// After the exit report every process that wrote to the pipes is gone, except in a session where
// a background program's children may have inherited them: their output is not waited for.
asio::awaitable<void> BoundOutputDrain(std::shared_ptr<SandboxCore> core,
                                       std::shared_ptr<RunState> st) {
  boost::system::error_code ec;
  st->drain.expires_after(std::chrono::milliseconds(500));
  co_await st->drain.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  if (ec || st->Finished()) co_return;
  core->stdout_r.cancel(ec);
  core->stderr_r.cancel(ec);
}

}  // namespace

// A session's runs after the first get fresh pipes: the previous ones reached EOF.
Status ReplacePipes(SandboxCore& core) {
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return Status::Errno("pipe2", errno);
  UniqueFd in_r(in[0]), in_w(in[1]);
  if (::pipe2(out, O_CLOEXEC) != 0) return Status::Errno("pipe2", errno);
  UniqueFd out_r(out[0]), out_w(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return Status::Errno("pipe2", errno);
  UniqueFd err_r(err[0]), err_w(err[1]);
  if (Status s = SendFdsFrame(core.service, Msg::kPipes, {in_r.get(), out_w.get(), err_w.get()});
      !s.ok()) {
    return s;
  }
  boost::system::error_code ec;
  for (auto* sd : {&core.stdin_w, &core.stdout_r, &core.stderr_r}) sd->close(ec);
  core.stdin_w.assign(in_w.release());
  core.stdout_r.assign(out_r.release());
  core.stderr_r.assign(err_r.release());
  for (auto* sd : {&core.stdin_w, &core.stdout_r, &core.stderr_r}) sd->non_blocking(true, ec);
  core.pipes_used = false;
  return {};
}

asio::awaitable<Result<RunOutcome>> RunOnStrand(std::shared_ptr<SandboxCore> core,
                                                proto::RunRequest request, RunPayload payload,
                                                OutputSink sink) {
  if (core->killed) co_return DeadSandboxError(*core, "run");
  if (core->frozen) co_return FrozenSandboxError("run");
  if (core->state != SandboxCore::State::kReady) {
    co_return Status::Error("run: the sandbox is not ready (a program already ran, or destroyed)");
  }
  if (core->prestarted && !payload.go) {
    co_return Status::Error("run: the sandbox's pre-started program waits for a go");
  }
  if (payload.argv.empty() && !payload.call && !core->prestarted) {
    co_return Status::Error("run: empty argv");
  }
  if ((payload.background || payload.call) && !core->session) {
    co_return Status::Error("run: background programs and calls need a session sandbox");
  }
  if (core->pipes_used) {
    // Only the service socket can fail here: init is gone.
    if (Status s = ReplacePipes(*core); !s.ok()) {
      co_return DeadSandboxError(*core, "run").NotStarted();
    }
  }
  core->state = SandboxCore::State::kRunning;
  core->pipes_used = true;
  core->recycle.client = payload.client;
  // A session takes the next run once this one is over; an execution sandbox only collects.
  const auto after = core->session ? SandboxCore::State::kReady : SandboxCore::State::kRan;
  for (const StagedFile& file : payload.files) {
    if (Status s = co_await SendFile(*core, file); !s.ok()) {
      core->state = after;
      co_return s.gone() ? s.NotStarted() : s.Context("staging " + file.workspace_path);
    }
  }
  request.argv = std::move(payload.argv);
  request.resume = core->prestarted;
  if (request.resume) request.argv.clear();
  if (payload.go) payload.stdin_data = *payload.go + payload.stdin_data.value_or("");
  request.background = payload.background;
  request.serves_calls = payload.serves_calls;
  request.call = payload.call.value_or("");
  // A call's OOM kill is told by the cgroup's counter, read before and after it.
  if (payload.call && !core->oom_file) {
    core->oom_file = core->pid > 0 ? FindSandboxOomFile(core->pid, core->cgroup)
                                   : FindSandboxOomFileOfInit(core->init_pid, core->cgroup);
  }
  const uint64_t oom_before = payload.call ? ReadOomKills(*core->oom_file) : 0;
  const std::string encoded = proto::Encode(request);
  Status sent = co_await WriteFrameAsync(core->service, Msg::kRun, encoded);
  Frame eof;
  eof.eof = true;
  Result<Frame> started = eof;
  if (sent.ok()) started = co_await ReadFrameAsync(core->service);
  core->state = after;
  // Init died before it said the program started: the program's sandbox died with it.
  if (!started.ok() || started->eof)
    co_return DeadSandboxError(*core, "program start").NotStarted();
  if (started->type == Msg::kError || started->type == Msg::kPrestartEnded) {
    std::string message;
    proto::DecodeError(started->payload, &message);
    // A pooled sandbox whose program died while it waited: the request goes to another one.
    if (started->type == Msg::kPrestartEnded) co_return Status::Gone(message).NotStarted();
    co_return Status::Error(message);
  }
  if (started->type != Msg::kStarted) co_return Status::Error("run: unexpected reply from init");
  proto::Started resumed;
  if (request.resume && proto::Decode(started->payload, &resumed)) {
    core->prestart_cpu_ms = resumed.cpu_before_ms;
  }
  const Clock::time_point start = Clock::now();

  auto st = std::make_shared<RunState>(core->strand);
  st->event.expires_at(Clock::time_point::max());
  asio::co_spawn(core->strand, EnforceDeadline(core, st, payload.timeout), asio::detached);
  asio::co_spawn(core->strand, AwaitExit(core, st), asio::detached);
  asio::co_spawn(core->strand, PumpOutput(core, st, StreamKind::kStdout, sink), asio::detached);
  asio::co_spawn(core->strand, PumpOutput(core, st, StreamKind::kStderr, sink), asio::detached);
  asio::co_spawn(core->strand, FeedStdin(core, std::move(payload.stdin_data)), asio::detached);
  bool draining = false;
  while (!st->Finished()) {
    if (st->exit_done && !draining) {
      draining = true;
      asio::co_spawn(core->strand, BoundOutputDrain(core, st), asio::detached);
    }
    boost::system::error_code ec;
    co_await st->event.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  st->deadline.cancel();
  st->drain.cancel();
  boost::system::error_code ignored;
  core->stdin_w.close(ignored);

  RunOutcome out;
  if (st->exited) {
    out.timed_out = st->exited->killed;
    if (!out.timed_out && st->exited->has_exit_code) out.exit_code = st->exited->exit_code;
    if (!out.timed_out && st->exited->signal != 0) out.signal = st->exited->signal;
    out.cpu_ms = st->exited->cpu_ms;
    out.max_rss_kb = st->exited->max_rss_kb;
    out.no_server = st->exited->no_server;
    out.oom_killed = payload.call && ReadOomKills(*core->oom_file) > oom_before;
    out.duration_ms = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(st->exited_at - start).count());
    co_return out;
  }
  if (st->forced_kill) {
    out.timed_out = true;
    out.duration_ms = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
    co_return out;
  }
  co_return DeadSandboxError(*core, "run");
}

}  // namespace ci::runtime
