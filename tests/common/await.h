// Drives one awaitable to completion on a test's io_context (tests are synchronous; the code under
// test is not).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>

namespace ci::testing_support {

// Runs `io` until `a` completed, not until `io` has no work left: what the code under test keeps
// running meanwhile (a container agent's stream reader) goes on at the next Await.
template <typename T>
T AwaitOn(boost::asio::io_context& io, boost::asio::awaitable<T> a) {
  std::optional<T> out;
  boost::asio::co_spawn(
      io, [&]() -> boost::asio::awaitable<void> { out.emplace(co_await std::move(a)); },
      boost::asio::detached);
  io.restart();
  while (!out && io.run_one() > 0) {
  }
  return std::move(*out);
}

inline void AwaitOn(boost::asio::io_context& io, boost::asio::awaitable<void> a) {
  bool done = false;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        co_await std::move(a);
        done = true;
      },
      boost::asio::detached);
  io.restart();
  while (!done && io.run_one() > 0) {
  }
}

}  // namespace ci::testing_support
