#include "docker/agent_attach.h"

#include <string>

#include "docker/stdcopy.h"

namespace ci::docker {
namespace {

class AttachTransport final : public container::AgentTransport {
 public:
  explicit AttachTransport(std::unique_ptr<RawStream> stream)
      : stream_(std::move(stream)), demux_([this](FrameDemuxer::Stream s, std::string_view bytes) {
          (*sink_)(s == FrameDemuxer::Stream::kStdout ? Stream::kStdout : Stream::kStderr, bytes);
        }) {}

  asio::awaitable<bool> ReadSome(const Sink& sink) override {
    boost::system::error_code ec;
    size_t n = co_await stream_->ReadSome(asio::buffer(buf_), ec);
    if (ec || n == 0) co_return false;
    sink_ = &sink;  // the demuxer's frames go to this call's sink
    bool ok = demux_.Feed(std::string_view(buf_.data(), n));
    sink_ = nullptr;
    co_return ok;
  }

  asio::awaitable<Status> WriteAll(std::string_view bytes) override {
    co_return co_await stream_->WriteAll(bytes);
  }

  void Close() override { stream_->Close(); }

 private:
  std::unique_ptr<RawStream> stream_;
  const Sink* sink_ = nullptr;
  FrameDemuxer demux_;
  std::string buf_ = std::string(64 << 10, '\0');
};

}  // namespace

std::unique_ptr<container::AgentTransport> DockerAttachTransport(
    std::unique_ptr<RawStream> stream) {
  return std::make_unique<AttachTransport>(std::move(stream));
}

}  // namespace ci::docker
