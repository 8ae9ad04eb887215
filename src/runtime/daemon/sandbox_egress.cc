// LocalSandbox::ListenInside: the egress proxy's listening socket, made by init inside the
// sandbox's network namespace and passed back over the service socket (docs/egress.md).
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "runtime/daemon/frame_io.h"
#include "runtime/daemon/local_sandbox.h"
#include "runtime/wire/fd_passing.h"
#include "runtime/wire/messages.h"

namespace ci::runtime {
namespace {

using proto::Msg;

// The answer to kEgressListen: its header carries the socket; a kError's payload says why.
asio::awaitable<Result<int>> ReceiveEgressSocket(SandboxCore& core) {
  boost::system::error_code ec;
  co_await core.service.async_wait(asio::posix::stream_descriptor::wait_read,
                                   asio::redirect_error(asio::use_awaitable, ec));
  unsigned char header[proto::kHeaderSize];
  std::vector<int> fds;
  if (ec || ReceiveWithFds(core.service.native_handle(), header, sizeof header, &fds) != 0) {
    co_return DeadSandboxError(core, "egress listen");
  }
  Msg type;
  uint32_t length = 0;
  const bool framed = proto::DecodeHeader(header, &type, &length);
  if (framed && type == Msg::kEgressSocket && fds.size() == 1) co_return fds[0];
  for (int fd : fds) ::close(fd);
  if (!framed || type != Msg::kError) co_return Status::Error("egress listen: unexpected reply");
  std::string payload(length, '\0');
  co_await asio::async_read(core.service, asio::buffer(payload),
                            asio::redirect_error(asio::use_awaitable, ec));
  std::string message = "the sandbox's init did not say";
  if (!ec) proto::DecodeError(payload, &message);
  co_return Status::Error(message);
}

asio::awaitable<Result<int>> ListenOnStrand(std::shared_ptr<SandboxCore> core, uint16_t port) {
  if (core->killed) co_return DeadSandboxError(*core, "egress listen");
  if (core->frozen) co_return FrozenSandboxError("egress listen");
  if (core->state != SandboxCore::State::kReady) {
    co_return Status::Error("egress listen: the sandbox is busy with a run, or destroyed");
  }
  core->state = SandboxCore::State::kRunning;
  Status sent = co_await WriteFrameAsync(core->service, Msg::kEgressListen, std::to_string(port));
  Result<int> socket = sent;
  if (sent.ok()) socket = co_await ReceiveEgressSocket(*core);
  core->state = SandboxCore::State::kReady;
  co_return socket;
}

}  // namespace

asio::awaitable<Result<std::shared_ptr<InsideListener>>> LocalSandbox::ListenInside(
    uint16_t port, asio::any_io_executor serve) {
  auto task = ListenOnStrand(core_, port);
  Result<int> fd = co_await OnStrand<Result<int>>(core_->strand, std::move(task));
  if (!fd.ok()) co_return fd.status();
  asio::ip::tcp::acceptor acceptor(serve);
  boost::system::error_code ec;
  acceptor.assign(asio::ip::tcp::v4(), *fd, ec);
  if (ec) {
    ::close(*fd);
    co_return Status::Error("egress socket: " + ec.message());
  }
  co_return std::make_shared<TcpInsideListener>(std::move(acceptor));
}

}  // namespace ci::runtime
