#include "runtime/daemon/frame_io.h"

#include <sys/socket.h>

#include <array>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstring>

namespace ci::runtime {

asio::awaitable<Result<Frame>> ReadFrameAsync(asio::posix::stream_descriptor& sd) {
  unsigned char header[proto::kHeaderSize];
  boost::system::error_code ec;
  size_t n = co_await asio::async_read(sd, asio::buffer(header),
                                       asio::redirect_error(asio::use_awaitable, ec));
  Frame frame;
  if (ec == asio::error::eof && n == 0) {
    frame.eof = true;
    co_return frame;
  }
  if (ec) co_return Status::Error("reading a frame header: " + ec.message());
  uint32_t length = 0;
  if (!proto::DecodeHeader(header, &frame.type, &length)) {
    co_return Status::Error("frame of " + std::to_string(length) + " bytes exceeds the limit");
  }
  frame.payload.resize(length);
  if (length > 0) {
    co_await asio::async_read(sd, asio::buffer(frame.payload),
                              asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      co_return Status::Error(std::string("reading a ") + proto::MsgName(frame.type) +
                              " frame: " + ec.message());
    }
  }
  co_return frame;
}

asio::awaitable<Status> WriteFrameAsync(asio::posix::stream_descriptor& sd, proto::Msg type,
                                        std::string_view payload) {
  // init takes a larger frame for a hostile peer's and exits: refused here, the sandbox lives.
  if (payload.size() > proto::kMaxPayload) {
    co_return Status::Error(std::string(proto::MsgName(type)) + " is larger than the " +
                            std::to_string(proto::kMaxPayload >> 20) +
                            " MiB a frame to init carries");
  }
  unsigned char header[proto::kHeaderSize];
  proto::EncodeHeader(type, static_cast<uint32_t>(payload.size()), header);
  const std::array<asio::const_buffer, 2> buffers = {asio::buffer(header),
                                                     asio::buffer(payload.data(), payload.size())};
  boost::system::error_code ec;
  co_await asio::async_write(sd, buffers, asio::redirect_error(asio::use_awaitable, ec));
  if (ec)
    co_return Status::Error(std::string("sending ") + proto::MsgName(type) + ": " + ec.message());
  co_return Status();
}

Status SendFdsFrame(asio::posix::stream_descriptor& sd, proto::Msg type,
                    const std::vector<int>& fds) {
  unsigned char header[proto::kHeaderSize];
  proto::EncodeHeader(type, 0, header);
  std::vector<char> control(CMSG_SPACE(fds.size() * sizeof(int)));
  struct iovec iov = {header, sizeof header};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
  std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
  ssize_t n;
  do {
    n = ::sendmsg(sd.native_handle(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof header)) {
    return Status::Errno(std::string("sending ") + proto::MsgName(type), n < 0 ? errno : EAGAIN);
  }
  return {};
}

}  // namespace ci::runtime
