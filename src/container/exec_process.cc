#include "container/exec_process.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <cstdlib>

#include "container/sandbox_shell.h"

namespace ci::container {
namespace {

class ExecProcess final : public SandboxProcess {
 public:
  ExecProcess(asio::any_io_executor ex, std::shared_ptr<ExecStream> stream, uint32_t pid,
              std::string early_stdout, std::string early_stderr)
      : ex_(std::move(ex)),
        stream_(std::move(stream)),
        pid_(pid),
        early_stdout_(std::move(early_stdout)),
        early_stderr_(std::move(early_stderr)) {}
  ~ExecProcess() override { stream_->Close(); }

  uint32_t pid() const override { return pid_; }

  asio::awaitable<ProcessEnd> Wait(ProcessOutputSink sink) override {
    if (!early_stdout_.empty()) co_await sink(StreamKind::kStdout, std::move(early_stdout_));
    if (!early_stderr_.empty()) co_await sink(StreamKind::kStderr, std::move(early_stderr_));
    // One read of the stream at a time, handed on before the next (the sink's pace).
    std::vector<std::pair<StreamKind, std::string>> chunks;
    const ExecOutputSink collect = [&chunks](ExecOutput kind, std::string_view data) {
      if (kind == ExecOutput::kSystemError) return;
      chunks.emplace_back(kind == ExecOutput::kStdout ? StreamKind::kStdout : StreamKind::kStderr,
                          std::string(data));
    };
    ProcessEnd end;
    for (;;) {
      Result<bool> more = co_await stream_->Read(collect);
      for (auto& [kind, data] : chunks) co_await sink(kind, std::move(data));
      chunks.clear();
      if (!more.ok()) {
        end.error = more.status().message();
        co_return end;
      }
      if (!*more) break;
    }
    Result<std::optional<int>> code = co_await stream_->ExitCode();
    if (!code.ok() || !code->has_value()) {
      end.error = code.ok() ? "its exit status is not known" : code.status().message();
      co_return end;
    }
    // The engine's 128+N for a death by signal N (an exit with such a code reads the same).
    const int status = **code;
    if (status > 128 && status < 128 + 65) {
      end.signal = status - 128;
    } else {
      end.exit_code = status;
    }
    co_return end;
  }

  asio::awaitable<Status> WriteStdin(std::string data) override {
    if (stdin_closed_) co_return Status::Error("its stdin is closed");
    co_return co_await stream_->WriteAll(data);
  }

  void CloseStdin() override {
    if (stdin_closed_) return;
    stdin_closed_ = true;
    asio::co_spawn(ex_, CloseStream(stream_), asio::detached);
  }

 private:
  static asio::awaitable<void> CloseStream(std::shared_ptr<ExecStream> stream) {
    co_await stream->CloseStdin();
  }

  asio::any_io_executor ex_;
  std::shared_ptr<ExecStream> stream_;
  uint32_t pid_;
  std::string early_stdout_, early_stderr_;
  bool stdin_closed_ = false;
};

}  // namespace

asio::awaitable<Result<std::unique_ptr<SandboxProcess>>> StartExecProcess(const Container& c,
                                                                          ProcessSpec spec) {
  const std::vector<std::string> argv =
      ProcessStartArgv(spec.cwd, spec.env, WithRunLimits(c.run_limits, spec.argv));
  // Without stdin it reads EOF at once (a pod's exec cannot end stdin otherwise).
  ExecStdin use{true, std::nullopt};
  if (!spec.stdin) use.exact_size = 0;
  auto started = co_await c.api->Exec(argv, use);
  if (!started.ok()) co_return started.status().Context("starting the process");
  std::shared_ptr<ExecStream> stream = *started;
  // The wrapper's first line; what the program printed in the same reads is kept for Wait.
  std::string out, err;
  const ExecOutputSink collect = [&](ExecOutput kind, std::string_view data) {
    (kind == ExecOutput::kStdout ? out : err).append(data);
  };
  size_t eol;
  while ((eol = out.find('\n')) == std::string::npos && out.size() < 4096) {
    Result<bool> more = co_await stream->Read(collect);
    if (!more.ok()) co_return more.status().Context("starting the process");
    if (!*more) break;
  }
  const std::string line = eol == std::string::npos ? out : out.substr(0, eol);
  if (!line.starts_with("pid ")) {
    stream->Close();
    std::string why = line.starts_with("error: ") ? line.substr(7) : "it did not start";
    if (!err.empty()) why += ": " + err.substr(0, 512);
    co_return Status::Error(why);
  }
  const auto pid = static_cast<uint32_t>(std::strtoul(line.c_str() + 4, nullptr, 10));
  auto process =
      std::make_unique<ExecProcess>(c.ex, stream, pid, out.substr(eol + 1), std::move(err));
  if (!spec.stdin) process->CloseStdin();
  std::unique_ptr<SandboxProcess> handle = std::move(process);
  co_return handle;
}

}  // namespace ci::container
