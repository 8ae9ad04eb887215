// Connections that programs in a sandbox open to a port on the sandbox's own loopback, each
// handed to the daemon as its end of a stream (the egress proxy's way in, docs/egress.md). The
// local runtime's is a TCP socket listening inside the sandbox's network namespace; a container's
// or pod's is its agent's, relaying each connection over the agent's stream.
#pragma once

#include <netinet/in.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "core/status.h"

namespace ci {

// Its connections are streams on the executor its maker was given (where they are served);
// Accept and Close are called on executor() (where the listener itself lives), which may be
// another thread's.
class InsideListener {
 public:
  using Stream = boost::asio::generic::stream_protocol::socket;
  virtual ~InsideListener() = default;
  // The next connection; an error once closed or the sandbox is gone.
  virtual boost::asio::awaitable<Result<Stream>> Accept() = 0;
  // No more connections: a pending Accept ends with an error. Connections already handed out
  // stay the caller's.
  virtual void Close() = 0;
  virtual boost::asio::any_io_executor executor() = 0;
};

// A TCP socket listening where the sandbox's programs connect (the local runtime's, made inside
// the sandbox's network namespace); accepted connections become generic streams on the
// acceptor's executor.
class TcpInsideListener : public InsideListener {
 public:
  explicit TcpInsideListener(boost::asio::ip::tcp::acceptor acceptor)
      : acceptor_(std::move(acceptor)) {}
  boost::asio::awaitable<Result<Stream>> Accept() override {
    boost::system::error_code ec;
    boost::asio::ip::tcp::socket client = co_await acceptor_.async_accept(
        boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    if (ec) co_return Status::Error("egress accept: " + ec.message());
    co_return Stream(acceptor_.get_executor(),
                     boost::asio::generic::stream_protocol(AF_INET, IPPROTO_TCP), client.release());
  }
  void Close() override {
    boost::system::error_code ec;
    acceptor_.close(ec);
  }
  boost::asio::any_io_executor executor() override { return acceptor_.get_executor(); }

 private:
  boost::asio::ip::tcp::acceptor acceptor_;
};

}  // namespace ci
