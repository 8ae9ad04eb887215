// A one-thread async event: coroutines wait until someone calls Notify(). Built on a timer that
// never expires, whose cancellation wakes the waiters (Boost 1.74 has no channels).
#pragma once

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <utility>

namespace ci::daemon {

class AsyncEvent {
 public:
  explicit AsyncEvent(boost::asio::any_io_executor ex) : timer_(ex) {
    timer_.expires_at(boost::asio::steady_timer::time_point::max());
  }
  // Wakes every current waiter; a later Wait() blocks until the next Notify().
  void Notify() { timer_.cancel(); }
  boost::asio::awaitable<void> Wait() {
    boost::system::error_code ec;
    co_await timer_.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    timer_.expires_at(boost::asio::steady_timer::time_point::max());
  }

 private:
  boost::asio::steady_timer timer_;
};

}  // namespace ci::daemon
