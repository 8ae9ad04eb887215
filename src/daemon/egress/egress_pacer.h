// A sandbox's egress bandwidth (EGRESS_BANDWIDTH_KBPS, docs/egress.md): a token bucket its
// proxy's connections draw from, both ways, so that one sandbox cannot take the host's link.
// A second's worth may pass at once; past it, a taker waits until its bytes fit.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace ci::daemon {

class EgressPacer {
 public:
  EgressPacer(boost::asio::any_io_executor ex, uint64_t bytes_per_second);
  // Returns once `bytes` more may pass.
  boost::asio::awaitable<void> Take(size_t bytes);

 private:
  using Clock = std::chrono::steady_clock;
  boost::asio::any_io_executor ex_;
  double rate_;    // bytes per second
  double tokens_;  // at most rate_; below zero: owed
  Clock::time_point last_;
};

}  // namespace ci::daemon
