// EgressPacer: what passes in a stretch of time is at most a second's worth more than the rate
// allows (a lower bound on the time taken: a loaded machine only makes it longer).
#include "daemon/egress/egress_pacer.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>

namespace ci::daemon {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// Seconds that `takers` coroutines need to pass `each` bytes apiece in 16 KiB pieces.
double SecondsFor(uint64_t rate, int takers, size_t each) {
  asio::io_context io;
  EgressPacer pacer(io.get_executor(), rate);
  const auto t0 = Clock::now();
  for (int i = 0; i < takers; ++i) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          for (size_t sent = 0; sent < each; sent += 16384) co_await pacer.Take(16384);
        },
        asio::detached);
  }
  io.run();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

TEST(EgressPacer, HoldsConnectionsTogetherToTheRate) {
  constexpr uint64_t kRate = 4 << 20;  // 4 MiB/s
  // 12 MiB over four connections: the first second's worth passes at once, the rest at the rate.
  EXPECT_GE(SecondsFor(kRate, 4, 3 << 20), 1.9);
}

}  // namespace
}  // namespace ci::daemon
