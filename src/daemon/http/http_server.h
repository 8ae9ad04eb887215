// The Beast HTTP/1.1 server: accept loop and one coroutine per connection, keep-alive, read and
// idle timeouts, header size limit, a connection cap, and the HttpExchange adapter around each
// request.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "daemon/http/http_exchange.h"

namespace ci::daemon {

using HttpHandler = std::function<asio::awaitable<void>(HttpExchange&)>;

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 8000;
  std::chrono::seconds read_timeout{30};  // per body chunk and per write
  std::chrono::seconds idle_timeout{60};  // waiting for the next request on a kept-alive connection
  // At this many open connections, a new one waits in the listen backlog until an idle one (the
  // longest idle) is closed for it or another ends (connection_limit.h).
  size_t max_connections = 1024;
};

class HttpServer {
 public:
  HttpServer(asio::io_context& io, HttpServerOptions options, HttpHandler handler);
  ~HttpServer();
  // Binds and listens; with port 0 the kernel picks one (see local_endpoint).
  Status Listen();
  // Accepts on `fd`, a socket that already listens (socket activation: socket_activation.h),
  // instead of Listen(). The server owns it from here on.
  Status Adopt(int fd);
  asio::ip::tcp::endpoint local_endpoint() const;
  void Start();
  // Shutdown: stop accepting; then close connections that are between requests. Requests in
  // flight finish and their connections close after the response.
  void StopAccepting();
  void CloseIdleConnections();
  size_t open_connections() const;
  size_t max_connections() const;

 public:
  struct State;  // shared with the connections (defined in http_server.cc)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace ci::daemon
