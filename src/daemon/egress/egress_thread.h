// The egress proxies' own thread (docs/egress.md "Threads"): every sandbox's proxy runs on this
// io_context, so relaying a sandbox's downloads never holds up the daemon's API on its thread.
// Everything of a proxy (its sockets, its state) is touched on this thread only; the daemon asks
// it things by hopping here (SandboxEgress).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <thread>

namespace ci::daemon {

class EgressThread {
 public:
  EgressThread() : work_(io_.get_executor()), thread_([this] { io_.run(); }) {}
  ~EgressThread() {
    work_.reset();
    io_.stop();
    thread_.join();
  }
  EgressThread(const EgressThread&) = delete;
  EgressThread& operator=(const EgressThread&) = delete;

  boost::asio::any_io_executor executor() { return io_.get_executor(); }

 private:
  boost::asio::io_context io_{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
};

}  // namespace ci::daemon
