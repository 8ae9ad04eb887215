#include "runtime/frame_io.h"

#include <array>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace ci {

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

}  // namespace ci
