#include "k8s/pod_container.h"

#include <algorithm>

#include "k8s/exec_protocol.h"

namespace ci::k8s {
namespace {

using container::ExecOutput;
using container::ExecOutputSink;
using container::ExecStdin;
using container::ExecStream;

class PodExec final : public container::ExecStream {
 public:
  explicit PodExec(std::unique_ptr<ExecConnection> conn) : conn_(std::move(conn)) {}

  bool v5() const { return conn_->protocol() == kProtocolV5; }

  asio::awaitable<Result<bool>> Read(const container::ExecOutputSink& sink) override {
    for (;;) {
      if (ended_) co_return false;
      auto message = co_await conn_->Read();
      if (!message.ok()) co_return message.status().Context("reading the exec stream");
      if (!message->has_value()) {
        ended_ = true;
        co_return false;
      }
      auto m = ParseChannelMessage(**message);
      if (!m) co_return Status::Error("exec stream: an empty message (no channel)");
      switch (static_cast<Channel>(m->channel)) {
        case Channel::kStdout:
        case Channel::kStderr:
          if (m->payload.empty()) continue;  // "streams ready"
          sink(m->channel == 1 ? container::ExecOutput::kStdout : container::ExecOutput::kStderr,
               m->payload);
          co_return true;
        case Channel::kError: {
          Result<int> code = ExitCodeFromStatus(m->payload);
          if (!code.ok()) {
            exit_code_ = code.status();
            sink(container::ExecOutput::kSystemError, code.status().message());
          } else {
            exit_code_ = std::optional<int>(*code);
          }
          co_return true;
        }
        default:
          continue;  // nothing else is sent without a tty
      }
    }
  }

  asio::awaitable<Status> WriteAll(std::string_view data) override {
    while (!data.empty()) {
      const size_t n = std::min(data.size(), kStdinMessageMax);
      const std::string message = StdinMessage(data.substr(0, n));
      Status w = co_await conn_->Write(message);
      if (!w.ok()) co_return w;
      data.remove_prefix(n);
    }
    co_return Status();
  }

  asio::awaitable<void> CloseStdin() override {
    if (!v5()) co_return;  // v4: the command was given its byte count (ExactStdinArgv)
    const std::string close = CloseStdinMessage();
    Status w = co_await conn_->Write(close);
    (void)w;  // a command that already ended closed the stream
  }

  void Close() override { conn_->Close(); }

  asio::awaitable<Result<std::optional<int>>> ExitCode() override {
    if (!exit_code_.ok()) co_return exit_code_.status();
    co_return *exit_code_;
  }

 private:
  std::unique_ptr<ExecConnection> conn_;
  bool ended_ = false;
  Result<std::optional<int>> exit_code_ = std::optional<int>();  // channel 3's, when it came
};

class PodContainer final : public container::ContainerApi {
 public:
  PodContainer(std::shared_ptr<ApiClient> client, PodRef pod,
               std::shared_ptr<ExecProtocolMemo> memo, RemovePod remove)
      : client_(std::move(client)),
        pod_(std::move(pod)),
        memo_(std::move(memo)),
        remove_(std::move(remove)) {}

  asio::awaitable<Result<std::shared_ptr<container::ExecStream>>> Exec(
      const std::vector<std::string>& cmd, container::ExecStdin stdin_use) override {
    ExecTarget t{pod_.namespace_, pod_.name, pod_.container, cmd, stdin_use.attach};
    if (stdin_use.exact_size) {
      if (*stdin_use.exact_size == 0) {
        t.stdin = false;  // EOF at once
      } else if (!memo_->known || !memo_->v5) {
        t.command = ExactStdinArgv(cmd, *stdin_use.exact_size);  // harmless on v5 too
      }
    }
    const std::string target = ExecRequestTarget(t);
    auto conn = co_await client_->Exec(target);
    if (!conn.ok()) {
      // The pod or its container is gone (deleted, its deadline passed, PID 1 ended).
      if (conn.status().gone())
        co_return Status::Gone("pod " + pod_.name + ": " + conn.status().message());
      co_return conn.status();
    }
    auto exec = std::make_shared<PodExec>(std::move(conn).value());
    memo_->known = true;
    memo_->v5 = exec->v5();
    co_return std::shared_ptr<container::ExecStream>(std::move(exec));
  }

  asio::awaitable<bool> SetPidsHeadroom(int) override { co_return false; }  // no per-pod knob
  asio::awaitable<pid_t> HostInitPid() override { co_return 0; }            // on a node elsewhere

  asio::awaitable<void> Remove(ResourceReport&) override {
    remove_(pod_);
    co_return;
  }
  void Kill() override { remove_(pod_); }

 private:
  std::shared_ptr<ApiClient> client_;
  PodRef pod_;
  std::shared_ptr<ExecProtocolMemo> memo_;
  RemovePod remove_;
};

}  // namespace

std::vector<std::string> ExactStdinArgv(const std::vector<std::string>& cmd, uint64_t size) {
  std::vector<std::string> argv = {"bash", "-c", "exec 0< <(exec head -c \"$0\"); exec \"$@\"",
                                   std::to_string(size)};
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  return argv;
}

std::shared_ptr<container::ContainerApi> MakePodContainer(std::shared_ptr<ApiClient> client,
                                                          PodRef pod,
                                                          std::shared_ptr<ExecProtocolMemo> memo,
                                                          RemovePod remove) {
  return std::make_shared<PodContainer>(std::move(client), std::move(pod), std::move(memo),
                                        std::move(remove));
}

}  // namespace ci::k8s
