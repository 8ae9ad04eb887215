#include "k8s/attach_transport.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "k8s/exec_protocol.h"

namespace ci::k8s {
namespace {

using container::AgentTransport;

class AttachTransport final : public container::AgentTransport {
 public:
  explicit AttachTransport(std::unique_ptr<ExecConnection> conn) : conn_(std::move(conn)) {}

  asio::awaitable<bool> ReadSome(const Sink& sink) override {
    auto message = co_await conn_->Read();
    if (!message.ok()) {
      spdlog::debug("agent attach: {}", message.status().message());
      co_return false;
    }
    if (!message->has_value()) co_return false;
    auto m = ParseChannelMessage(**message);
    if (!m) co_return false;
    switch (static_cast<Channel>(m->channel)) {
      case Channel::kStdout:
        sink(Stream::kStdout, m->payload);  // (empty: "streams ready")
        co_return true;
      case Channel::kStderr:
        sink(Stream::kStderr, m->payload);
        co_return true;
      case Channel::kError:
        // The container's output ended (Success), or the attach failed: either way the end.
        spdlog::debug("agent attach ended: {}", m->payload);
        co_return false;
      default:
        co_return true;  // nothing else is sent without a tty
    }
  }

  asio::awaitable<Status> WriteAll(std::string_view bytes) override {
    while (!bytes.empty()) {
      const size_t n = std::min(bytes.size(), kStdinMessageMax);
      const std::string message = StdinMessage(bytes.substr(0, n));
      Status w = co_await conn_->Write(message);
      if (!w.ok()) co_return w;
      bytes.remove_prefix(n);
    }
    co_return Status();
  }

  void Close() override { conn_->Close(); }

 private:
  std::unique_ptr<ExecConnection> conn_;
};

}  // namespace

std::unique_ptr<container::AgentTransport> PodAttachTransport(
    std::unique_ptr<ExecConnection> conn) {
  return std::make_unique<AttachTransport>(std::move(conn));
}

}  // namespace ci::k8s
