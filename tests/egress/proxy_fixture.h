// What the proxy's tests share: a proxy accepting on a loopback socket, its io_context on a
// thread of its own (as the egress thread), and blocking clients on another context.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/inside_listener.h"
#include "daemon/egress/egress_proxy.h"

namespace ci::daemon {

class ProxyFixture : public ::testing::Test {
 protected:
  using tcp = boost::asio::ip::tcp;

  static tcp::acceptor Listen(boost::asio::io_context& io) {
    return tcp::acceptor(io, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  }
  // Everything until the other side closes.
  static std::string ReadAll(auto& s) {
    std::string out;
    boost::system::error_code ec;
    char buf[4096];
    while (size_t n = s.read_some(boost::asio::buffer(buf), ec)) out.append(buf, n);
    return out;
  }

  // The proxy with `options`, accepting, and the context running (with what the test spawned).
  void StartProxy(EgressProxyOptions options) {
    proxy_ = std::make_shared<EgressProxy>(io_.get_executor(), std::move(options));
    boost::asio::co_spawn(io_, proxy_->Accept(listener_), boost::asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  // Closes the listener and `servers`, stops the context.
  void StopProxy(std::vector<tcp::acceptor*> servers) {
    boost::asio::post(io_, [this, servers] {
      listener_->Close();
      for (tcp::acceptor* a : servers) a->close();
    });
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }
  EgressReport Report() {
    std::promise<EgressReport> done;
    boost::asio::post(io_, [&] { done.set_value(proxy_->report()); });
    return done.get_future().get();
  }

  boost::asio::io_context io_;
  boost::asio::io_context client_io_;
  tcp::acceptor proxy_acceptor_ = Listen(io_);
  tcp::endpoint proxy_endpoint_ = proxy_acceptor_.local_endpoint();
  std::shared_ptr<TcpInsideListener> listener_ =
      std::make_shared<TcpInsideListener>(std::move(proxy_acceptor_));
  std::shared_ptr<EgressProxy> proxy_;
  std::thread thread_;
};

}  // namespace ci::daemon
