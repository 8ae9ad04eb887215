#include "daemon/service/admission.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <string>
#include <vector>

namespace ci::daemon {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

asio::awaitable<void> Sleep(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

// Each client takes a slot (or is refused), holds it for `hold`, and records the order.
struct Client {
  int id;
  std::chrono::milliseconds start_after, hold;
  std::string key = "";  // the API key's name
};

std::vector<std::string> Simulate(uint32_t limit, std::chrono::milliseconds queue_timeout,
                                  std::vector<Client> clients, Admission::ShareOf share_of = {}) {
  asio::io_context io;
  Admission admission(io.get_executor(), limit, queue_timeout, std::move(share_of));
  std::vector<std::string> events;
  for (const auto& c : clients) {
    asio::co_spawn(
        io,
        [&, c]() -> asio::awaitable<void> {
          co_await Sleep(c.start_after);
          auto permit = co_await admission.Acquire(c.key);
          if (!permit) {
            events.push_back("reject " + std::to_string(c.id));
            co_return;
          }
          events.push_back("run " + std::to_string(c.id));
          co_await Sleep(c.hold);
          events.push_back("done " + std::to_string(c.id));
        },
        asio::detached);
  }
  io.run();
  EXPECT_EQ(admission.running(), 0u);
  EXPECT_EQ(admission.queued(), 0u);
  return events;
}

TEST(Admission, RunsUpToTheLimitAtOnce) {
  auto events = Simulate(2, 1000ms, {{1, 0ms, 50ms}, {2, 0ms, 50ms}});
  EXPECT_EQ(events, (std::vector<std::string>{"run 1", "run 2", "done 1", "done 2"}));
}

TEST(Admission, WaitersAreServedInArrivalOrder) {
  auto events = Simulate(1, 1000ms, {{1, 0ms, 60ms}, {2, 10ms, 10ms}, {3, 20ms, 10ms}});
  EXPECT_EQ(events,
            (std::vector<std::string>{"run 1", "done 1", "run 2", "done 2", "run 3", "done 3"}));
}

// Issue #30 item 6: alice's three waiters do not all go before bob's one.
TEST(Admission, KeysTakeTurnsForFreedSlots) {
  auto events = Simulate(1, 1000ms,
                         {{1, 0ms, 60ms, "alice"},
                          {2, 10ms, 10ms, "alice"},
                          {3, 11ms, 10ms, "alice"},
                          {4, 12ms, 10ms, "alice"},
                          {5, 20ms, 10ms, "bob"}});
  EXPECT_EQ(events, (std::vector<std::string>{"run 1", "done 1", "run 2", "done 2", "run 5",
                                              "done 5", "run 3", "done 3", "run 4", "done 4"}));
}

// A key holds at most its share even with slots free; another key takes them, and the key's
// waiter runs when one of its own ends. A share of 0 is refused at once.
TEST(Admission, AKeyHoldsAtMostItsShare) {
  auto share = [](const std::string& client) -> uint32_t {
    return client == "alice" ? 2 : client == "mallory" ? 0 : 3;
  };
  auto events = Simulate(3, 1000ms,
                         {{1, 0ms, 50ms, "alice"},
                          {2, 1ms, 80ms, "alice"},
                          {3, 2ms, 10ms, "alice"},
                          {4, 10ms, 10ms, "bob"},
                          {5, 12ms, 10ms, "mallory"}},
                         share);
  EXPECT_EQ(events, (std::vector<std::string>{"run 1", "run 2", "run 4", "reject 5", "done 4",
                                              "done 1", "run 3", "done 3", "done 2"}));
}

// A share raised while a key's requests wait (the key file read again): they run at once, not
// when one of the key's running ones ends.
TEST(Admission, ARaisedShareServesTheWaitersAtOnce) {
  asio::io_context io;
  uint32_t alice_share = 1;
  Admission admission(io.get_executor(), 4, 1000ms,
                      [&](const std::string&) { return alice_share; });
  std::vector<std::string> events;
  for (int id : {1, 2, 3}) {
    asio::co_spawn(
        io,
        [&, id]() -> asio::awaitable<void> {
          co_await Sleep(std::chrono::milliseconds(id));
          auto permit = co_await admission.Acquire("alice");
          events.push_back((permit ? "run " : "reject ") + std::to_string(id));
          co_await Sleep(200ms);
        },
        asio::detached);
  }
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await Sleep(20ms);
        events.push_back("share 3");
        alice_share = 3;
        admission.SharesChanged();
        co_await Sleep(10ms);
        events.push_back("running " + std::to_string(admission.running()));
      },
      asio::detached);
  io.run();
  EXPECT_EQ(events, (std::vector<std::string>{"run 1", "share 3", "run 2", "run 3", "running 3"}));
}

TEST(Admission, ATimedOutWaiterLeavesTheTurns) {
  auto events = Simulate(
      1, 30ms, {{1, 0ms, 100ms, "alice"}, {2, 10ms, 10ms, "bob"}, {3, 80ms, 10ms, "carol"}});
  EXPECT_EQ(events, (std::vector<std::string>{"run 1", "reject 2", "done 1", "run 3", "done 3"}));
}

TEST(Admission, AWaiterIsRefusedAfterTheQueueTimeout) {
  auto events = Simulate(1, 30ms, {{1, 0ms, 200ms}, {2, 10ms, 10ms}});
  EXPECT_EQ(events, (std::vector<std::string>{"run 1", "reject 2", "done 1"}));
}

TEST(Admission, ZeroQueueTimeoutRefusesAtOnceWhenFull) {
  auto events = Simulate(1, 0ms, {{1, 0ms, 50ms}, {2, 10ms, 10ms}, {3, 100ms, 10ms}});
  EXPECT_EQ(events, (std::vector<std::string>{"run 1", "reject 2", "done 1", "run 3", "done 3"}));
}

}  // namespace
}  // namespace ci::daemon
