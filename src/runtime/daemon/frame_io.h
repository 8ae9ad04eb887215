// Daemon side of the wire format (protocol.h): async frame reads and writes on a socket wrapped
// in an asio stream_descriptor. Errors come back as values; nothing throws but bad_alloc.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "runtime/wire/protocol.h"

namespace ci::runtime {

namespace asio = boost::asio;

struct Frame {
  bool eof = false;  // the peer closed the socket before a new frame began
  proto::Msg type = proto::Msg::kError;
  std::string payload;
};

asio::awaitable<Result<Frame>> ReadFrameAsync(asio::posix::stream_descriptor& sd);
asio::awaitable<Status> WriteFrameAsync(asio::posix::stream_descriptor& sd, proto::Msg type,
                                        std::string_view payload = {});
// An empty frame carrying descriptors (SCM_RIGHTS), sent at once without blocking: only used
// between runs, when the peer has nothing unread on the socket.
Status SendFdsFrame(asio::posix::stream_descriptor& sd, proto::Msg type,
                    const std::vector<int>& fds);

}  // namespace ci::runtime
