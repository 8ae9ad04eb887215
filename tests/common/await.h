// Drives one awaitable to completion on a test's io_context (tests are synchronous; the code under
// test is not).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>

namespace ci::testing_support {

template <typename T>
T AwaitOn(boost::asio::io_context& io, boost::asio::awaitable<T> a) {
  std::optional<T> out;
  boost::asio::co_spawn(
      io, [&]() -> boost::asio::awaitable<void> { out.emplace(co_await std::move(a)); },
      boost::asio::detached);
  io.restart();
  io.run();
  return std::move(*out);
}

inline void AwaitOn(boost::asio::io_context& io, boost::asio::awaitable<void> a) {
  boost::asio::co_spawn(io, std::move(a), boost::asio::detached);
  io.restart();
  io.run();
}

}  // namespace ci::testing_support
