// A coroutine pause on the caller's executor (retries, sweeps, polls).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>

namespace ci {

// Returns after `d`, or earlier when the executor's context stops (the timer's error is ignored).
inline boost::asio::awaitable<void> Sleep(std::chrono::steady_clock::duration d) {
  boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, d);
  boost::system::error_code ec;
  co_await t.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
}

}  // namespace ci
