#include "daemon/egress/egress_pacer.h"

#include <algorithm>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace ci::daemon {

EgressPacer::EgressPacer(boost::asio::any_io_executor ex, uint64_t bytes_per_second)
    : ex_(std::move(ex)),
      rate_(static_cast<double>(bytes_per_second)),
      tokens_(rate_),
      last_(Clock::now()) {}

boost::asio::awaitable<void> EgressPacer::Take(size_t bytes) {
  const Clock::time_point now = Clock::now();
  tokens_ = std::min(rate_, tokens_ + std::chrono::duration<double>(now - last_).count() * rate_);
  last_ = now;
  tokens_ -= static_cast<double>(bytes);
  if (tokens_ >= 0) co_return;
  // What is owed (by this taker and those before it) is paid back at the rate.
  boost::asio::steady_timer wait(ex_, std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(-tokens_ / rate_)));
  boost::system::error_code ec;
  co_await wait.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
}

}  // namespace ci::daemon
