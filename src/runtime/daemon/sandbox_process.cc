// LocalSandbox::Spawn and Signal: a session's processes (core/executor.h ProcessSpec). The
// daemon makes each one's pipes and hands init the far ends (kProcessFds, kSpawn); init writes
// its end to the status pipe when it reaps it, so no frame on the service socket is unsolicited.
#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "runtime/daemon/frame_io.h"
#include "runtime/daemon/local_sandbox.h"

namespace ci::runtime {
namespace {

using proto::Msg;

// How long output is waited for after the process ended while none comes: what it left behind
// may hold its pipes open for as long as it lives.
constexpr auto kOutputAfterEnd = std::chrono::milliseconds(500);

class LocalProcess final : public SandboxProcess {
 public:
  LocalProcess(const Strand& strand, uint32_t pid, UniqueFd in, UniqueFd out, UniqueFd err,
               UniqueFd status)
      : strand_(strand),
        pid_(pid),
        stdin_(strand),
        stdout_(strand, out.release()),
        stderr_(strand, err.release()),
        status_(strand, status.release()) {
    if (in.valid()) stdin_.assign(in.release());
  }

  uint32_t pid() const override { return pid_; }

  asio::awaitable<ProcessEnd> Wait(ProcessOutputSink sink) override {
    auto task = WaitOnStrand(std::move(sink));
    co_return co_await OnStrand<ProcessEnd>(strand_, std::move(task));
  }

  asio::awaitable<Status> WriteStdin(std::string data) override {
    auto task = WriteOnStrand(std::move(data));
    co_return co_await OnStrand<Status>(strand_, std::move(task));
  }

  void CloseStdin() override {
    asio::post(strand_, [this] {
      boost::system::error_code ec;
      stdin_.close(ec);
    });
  }

 private:
  struct Pumps {
    explicit Pumps(const Strand& s) : event(s) {}
    asio::steady_timer event;  // cancelled: output came, or a pump finished
    int open_outputs = 2;
    int in_sink = 0;        // pumps whose chunk the sink still holds
    bool stopping = false;  // the pipes were cancelled: a read that completed first ends too
  };

  asio::awaitable<void> Pump(std::shared_ptr<Pumps> p, asio::posix::stream_descriptor& pipe,
                             StreamKind kind, ProcessOutputSink sink) {
    std::vector<char> buf(64 << 10);
    for (;;) {
      boost::system::error_code ec;
      size_t n = co_await pipe.async_read_some(asio::buffer(buf),
                                               asio::redirect_error(asio::use_awaitable, ec));
      if (n > 0) {
        ++p->in_sink;
        co_await sink(kind, std::string(buf.data(), n));
        --p->in_sink;
        p->event.cancel();
      }
      if (ec || p->stopping) break;
    }
    --p->open_outputs;
    p->event.cancel();
  }

  asio::awaitable<ProcessEnd> WaitOnStrand(ProcessOutputSink sink) {
    auto p = std::make_shared<Pumps>(strand_);
    asio::co_spawn(strand_, Pump(p, stdout_, StreamKind::kStdout, sink), asio::detached);
    asio::co_spawn(strand_, Pump(p, stderr_, StreamKind::kStderr, sink), asio::detached);
    // The status pipe: init's Exited once it reaped the process; EOF alone: init is gone.
    std::string status;
    std::array<char, 512> buf;
    for (;;) {
      boost::system::error_code ec;
      size_t n = co_await status_.async_read_some(asio::buffer(buf),
                                                  asio::redirect_error(asio::use_awaitable, ec));
      status.append(buf.data(), n);
      if (ec) break;
    }
    ProcessEnd end;
    proto::Exited exited;
    if (!status.empty() && proto::Decode(status, &exited)) {
      if (exited.has_exit_code) end.exit_code = exited.exit_code;
      if (exited.signal != 0) end.signal = exited.signal;
    } else {
      end.error = "the sandbox ended while the process ran";
    }
    while (p->open_outputs > 0) {
      boost::system::error_code ec;
      p->event.expires_after(kOutputAfterEnd);
      co_await p->event.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      // None came for that long (and the sink holds none): what holds the pipes is not waited for.
      if (!ec && p->in_sink == 0) break;
    }
    boost::system::error_code ec;
    p->stopping = true;
    stdout_.cancel(ec);
    stderr_.cancel(ec);
    while (p->open_outputs > 0) {  // the pumps see the cancel and end
      p->event.expires_after(std::chrono::hours(1));
      co_await p->event.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    co_return end;
  }

  asio::awaitable<Status> WriteOnStrand(std::string data) {
    if (!stdin_.is_open()) co_return Status::Error("its stdin is closed");
    boost::system::error_code ec;
    co_await asio::async_write(stdin_, asio::buffer(data),
                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return Status::Error("writing its stdin: " + ec.message());
    co_return Status();
  }

  Strand strand_;
  uint32_t pid_;
  asio::posix::stream_descriptor stdin_, stdout_, stderr_, status_;
};

struct Pipe {
  UniqueFd read, write;
};

Result<Pipe> MakePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::Errno("pipe2", errno);
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

asio::awaitable<Result<std::unique_ptr<SandboxProcess>>> SpawnOnStrand(
    std::shared_ptr<SandboxCore> core, proto::RunRequest request, bool stdin_wanted) {
  if (core->killed) co_return DeadSandboxError(*core, "process start");
  if (core->frozen) co_return FrozenSandboxError("process start");
  if (!core->session) co_return Status::Error("processes need a session sandbox");
  if (core->state != SandboxCore::State::kReady) {
    co_return Status::Error("process start: the sandbox is busy with a run, or destroyed");
  }
  // Checked before kProcessFds: once init has the fds it expects the kSpawn that goes with them.
  const std::string encoded = proto::Encode(request);
  if (encoded.size() > proto::kMaxPayload) {
    co_return Status::Error("process start: its argv, environment and cwd come to more than " +
                            std::to_string(proto::kMaxPayload >> 20) + " MiB");
  }
  Result<Pipe> in = MakePipe(), out = MakePipe(), err = MakePipe(), status = MakePipe();
  for (const Result<Pipe>* p : {&in, &out, &err, &status}) {
    if (!p->ok()) co_return p->status();
  }
  core->state = SandboxCore::State::kRunning;
  // init installs them as the run's stdio (fds 5/6/7): the next run sends new ones.
  core->pipes_used = true;
  Status sent =
      SendFdsFrame(core->service, Msg::kProcessFds,
                   {in->read.get(), out->write.get(), err->write.get(), status->write.get()});
  if (sent.ok()) sent = co_await WriteFrameAsync(core->service, Msg::kSpawn, encoded);
  Result<Frame> reply = sent;
  if (sent.ok()) reply = co_await ReadFrameAsync(core->service);
  core->state = SandboxCore::State::kReady;
  if (!reply.ok() || reply->eof) co_return DeadSandboxError(*core, "process start");
  if (reply->type == Msg::kError) {
    std::string message;
    proto::DecodeError(reply->payload, &message);
    co_return Status::Error("process start: " + message);
  }
  proto::Spawned spawned;
  if (reply->type != Msg::kSpawned || !proto::Decode(reply->payload, &spawned)) {
    co_return Status::Error("process start: unexpected reply from init");
  }
  if (spawned.pid == 0 && spawned.no_room) {
    co_return Status::Unavailable("process limit",
                                  "the sandbox's process limit is reached (" + spawned.why + ")");
  }
  if (spawned.pid == 0) co_return Status::Error(spawned.why);
  // Only the process holds the far ends now: EOF on them is its tree's end.
  if (!stdin_wanted) in->write.reset();  // it reads EOF at once
  std::unique_ptr<SandboxProcess> process = std::make_unique<LocalProcess>(
      core->strand, spawned.pid, std::move(in->write), std::move(out->read), std::move(err->read),
      std::move(status->read));
  co_return process;
}

asio::awaitable<Status> SignalOnStrand(std::shared_ptr<SandboxCore> core,
                                       proto::SignalRequest request) {
  if (core->killed) co_return DeadSandboxError(*core, "signal");
  if (core->frozen) co_return FrozenSandboxError("signal");
  if (core->state != SandboxCore::State::kReady) {
    co_return Status::Error("signal: the sandbox is busy with a run, or destroyed");
  }
  core->state = SandboxCore::State::kRunning;
  const std::string encoded = proto::Encode(request);
  Status sent = co_await WriteFrameAsync(core->service, Msg::kSignal, encoded);
  Result<Frame> reply = sent;
  if (sent.ok()) reply = co_await ReadFrameAsync(core->service);
  core->state = SandboxCore::State::kReady;
  if (!reply.ok() || reply->eof) co_return DeadSandboxError(*core, "signal");
  if (reply->type == Msg::kError) {
    std::string message;
    proto::DecodeError(reply->payload, &message);
    co_return Status::Error("signal: " + message);
  }
  if (reply->type != Msg::kSignalled) co_return Status::Error("signal: unexpected reply");
  co_return Status();
}

}  // namespace

asio::awaitable<Result<std::unique_ptr<SandboxProcess>>> LocalSandbox::Spawn(ProcessSpec spec) {
  proto::RunRequest request;
  request.argv = std::move(spec.argv);
  request.env = std::move(spec.env);
  request.cwd = std::move(spec.cwd);
  auto task = SpawnOnStrand(core_, std::move(request), spec.stdin);
  co_return co_await OnStrand<Result<std::unique_ptr<SandboxProcess>>>(core_->strand,
                                                                       std::move(task));
}

asio::awaitable<Status> LocalSandbox::Signal(uint32_t pid, int signal) {
  auto task = SignalOnStrand(core_, proto::SignalRequest{pid, signal});
  co_return co_await OnStrand<Status>(core_->strand, std::move(task));
}

}  // namespace ci::runtime
