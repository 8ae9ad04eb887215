// The warm pool in front of the fake backend (WARM_POOL_SIZE): a request takes a sandbox prepared
// before it came, the pool refills, sessions take sandboxes of their own, and shutdown destroys
// what the pool held.
#include <chrono>
#include <functional>
#include <set>
#include <thread>

#include "daemon/service/warm_pool.h"
#include "fake_daemon.h"

namespace ci::daemon {
namespace {

using asio::awaitable;

class WarmPoolApiTest : public DaemonApiTest {
 protected:
  static std::string PoolSeries(const std::string& name) {
    return "code_interpreter_warm_pool_" + name + "{pool=\"python\"}";
  }
  // Polls `pred` until it holds; false after a generous bound (a hang, not a timing check).
  static bool Eventually(const std::function<bool()>& pred) {
    for (int i = 0; i < 10000; ++i) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }
  void SetUp() override {
    Start([](Config& c) { c.warm_pool_size = 1; });
    fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> {
      p.Stdout(std::to_string(p.sandbox_number()));
      co_return p.Exit(0);
    });
  }
};

TEST_F(WarmPoolApiTest, ARequestTakesThePooledSandboxAndThePoolRefills) {
  ASSERT_TRUE(fake().WaitUntil([](const FakeCounts& c) { return c.prepared == 1; }));
  HttpReply r = client().Post("/v1/execute", R"({"code": "x"})");
  EXPECT_EQ(Str(Json(r), "stdout"), "1");  // prepared before the request came
  ASSERT_TRUE(fake().WaitUntil([](const FakeCounts& c) { return c.prepared == 2; }));
  EXPECT_EQ(fake().counts().live(), 1);  // the refill, waiting in the pool
  EXPECT_EQ(Str(Json(client().Post("/v1/execute", R"({"code": "x"})")), "stdout"), "2");
}

// A pooled sandbox that died while it waited (its dockerd restarted) is never the answer: the
// program runs in another one. When every sandbox is gone the request fails, and nothing leaks.
TEST_F(WarmPoolApiTest, ASandboxGoneBeforeTheRunIsReplaced) {
  fake().LoseBeforeRun({1, 2});
  ASSERT_TRUE(fake().WaitUntil([](const FakeCounts& c) { return c.prepared == 1; }));
  HttpReply r = client().Post("/v1/execute", R"({"code": "x"})");
  EXPECT_EQ(r.status, 200) << r.body;
  std::string ran_in = Str(Json(r), "stdout");
  EXPECT_TRUE(ran_in != "1" && ran_in != "2" && !ran_in.empty()) << ran_in;
  std::set<int> all;
  for (int i = 1; i < 1000; ++i) all.insert(i);
  fake().LoseBeforeRun(all);
  EXPECT_EQ(client().Post("/v1/execute", R"({"code": "x"})").status, 500);
  EXPECT_TRUE(fake().WaitUntil([](const FakeCounts& c) { return c.live() == 1; }));  // the pool's
}

// A pooled sandbox known to be dead (a local one whose init exited: its fork server died) is
// never taken: it is destroyed and counted, and the request gets a sandbox made for it.
TEST_F(WarmPoolApiTest, APooledSandboxKnownDeadIsReplacedNotTaken) {
  fake().DieWhileIdle({1});
  ASSERT_TRUE(fake().WaitUntil([](const FakeCounts& c) { return c.prepared == 1; }));
  HttpReply r = client().Post("/v1/execute", R"({"code": "x"})");
  EXPECT_EQ(r.status, 200) << r.body;
  const std::string ran_in = Str(Json(r), "stdout");
  EXPECT_TRUE(ran_in != "1" && !ran_in.empty()) << ran_in;
  EXPECT_EQ(fake().counts().runs_started, 1);  // none in the dead one
  EXPECT_TRUE(fake().WaitUntil([](const FakeCounts& c) { return c.destroyed >= 2; }));
  EXPECT_NE(client()
                .Get("/metrics")
                .body.find("code_interpreter_warm_pool_dead_total{pool=\"python\"} 1\n"),
            std::string::npos);
}

// A sandbox that dies under a running program is the request's failure: the program ran, so it
// is never run a second time.
TEST_F(WarmPoolApiTest, ASandboxLostWhileTheProgramRunsIsNotRetried) {
  fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> { co_return p.LoseSandbox(); });
  EXPECT_EQ(client().Post("/v1/execute", R"({"code": "x"})").status, 500);
  EXPECT_EQ(fake().counts().runs_started, 1);
}

// A request that finds the pool empty while its refill is under way takes that refill's sandbox
// instead of having a second one made beside it; one request at a time waits so, and a refill
// that fails is not waited for.
TEST_F(WarmPoolApiTest, ARequestThatFindsThePoolEmptyTakesTheRefillUnderWay) {
  ASSERT_TRUE(fake().WaitUntil([](const FakeCounts& c) { return c.prepared == 1; }));
  FakeGate gate;
  fake().HoldPrepares(&gate);
  EXPECT_EQ(Str(Json(client().Post("/v1/execute", R"({"code": "x"})")), "stdout"), "1");
  HttpReply waited, own;
  std::thread second([&] { waited = client().Post("/v1/execute", R"({"code": "x"})"); });
  EXPECT_TRUE(Eventually([&] { return MetricNow(PoolSeries("misses_total")) == 1; }));
  std::thread third([&] { own = client().Post("/v1/execute", R"({"code": "x"})"); });
  EXPECT_TRUE(Eventually([&] { return MetricNow(PoolSeries("misses_total")) == 2; }));
  gate.Open();
  second.join();
  third.join();
  fake().HoldPrepares(nullptr);
  EXPECT_EQ(waited.status, 200) << waited.body;
  EXPECT_EQ(own.status, 200) << own.body;
  EXPECT_NE(Str(Json(waited), "stdout"), Str(Json(own), "stdout"));
  EXPECT_EQ(Metric(PoolSeries("waits_total")), 1);  // the second; the third had its own made

  FakeGate failing;
  fake().HoldPrepares(&failing);
  ASSERT_TRUE(Eventually([&] { return Metric(PoolSeries("ready")) == 1; }));
  client().Post("/v1/execute", R"({"code": "x"})");  // takes it; the refill waits at the gate
  std::thread fourth([&] { waited = client().Post("/v1/execute", R"({"code": "x"})"); });
  EXPECT_TRUE(Eventually([&] { return MetricNow(PoolSeries("misses_total")) == 3; }));
  fake().FailPrepare(Status::Error("no room"));
  failing.Open();
  fourth.join();
  fake().HoldPrepares(nullptr);
  EXPECT_EQ(waited.status, 200) << waited.body;  // a sandbox made for it
  EXPECT_EQ(Metric(PoolSeries("waits_total")), 1);
}

TEST(RefillBackoff, OneSecondDoubledUpToFiveMinutes) {
  using std::chrono::seconds;
  EXPECT_EQ(RefillBackoff(1), seconds(1));
  EXPECT_EQ(RefillBackoff(2), seconds(2));
  EXPECT_EQ(RefillBackoff(3), seconds(4));
  EXPECT_EQ(RefillBackoff(9), seconds(256));
  EXPECT_EQ(RefillBackoff(10), seconds(300));
  EXPECT_EQ(RefillBackoff(1 << 30), seconds(300));
}

// A pool whose backend cannot start sandboxes (a refused permission, a missing image) waits 1 s,
// 2 s, 4 s... between tries instead of asking every second; a request whose own sandbox starts
// shows the backend works again, and the pool tries at once.
TEST_F(WarmPoolApiTest, APoolThatCannotFillBacksOffAndTriesAtOnceWhenTheBackendWorks) {
  using Clock = std::chrono::steady_clock;
  ASSERT_TRUE(fake().WaitUntil([](const FakeCounts& c) { return c.prepared == 1; }));
  fake().FailPrepare(Status::Error("no room"), 4);
  const auto sent = Clock::now();
  EXPECT_EQ(client().Post("/v1/execute", R"({"code": "x"})").status, 200);  // the pooled one
  ASSERT_TRUE(Eventually([&] { return MetricNow(PoolSeries("fill_failures_total")) == 4; }));
  // Tries at 0, 1, 3 and 7 s (a busy machine only makes them later); every second: 3 s.
  const auto fourth = Clock::now();
  EXPECT_GE(fourth - sent, std::chrono::seconds(7));
  EXPECT_EQ(Metric(PoolSeries("ready")), 0);

  // 8 s to the next try; a request's own sandbox starts (the failures are used up) and the pool
  // fills at once.
  EXPECT_EQ(client().Post("/v1/execute", R"({"code": "x"})").status, 200);
  ASSERT_TRUE(Eventually([&] { return MetricNow(PoolSeries("ready")) == 1; }));
  // (Without the wake-up it fills 8 s after the fourth failure; 3 s of margin either way.)
  EXPECT_LT(Clock::now() - fourth, std::chrono::seconds(5)) << "the pool waited out its back-off";
  EXPECT_EQ(Metric(PoolSeries("fill_failures_total")), 4);
}

TEST_F(WarmPoolApiTest, ASessionGetsASandboxOfItsOwn) {
  ASSERT_TRUE(fake().WaitUntil([](const FakeCounts& c) { return c.prepared == 1; }));
  std::string id = Str(Json(client().Post("/v1/sessions", "{}")), "session_id");
  HttpReply r = client().Post("/v1/sessions/" + id + "/bash", R"({"cmd": "x"})");
  EXPECT_EQ(Str(Json(r), "stdout"), "2");
  EXPECT_EQ(fake().counts().live(), 2);  // the session's and the pooled one
}

}  // namespace
}  // namespace ci::daemon

namespace ci::daemon {
namespace {

// One pool per distinct sandbox: Python's (a pre-started interpreter) and bash's, each with the
// size its variable gives, and /metrics tells how each one goes.
class WarmPoolsApiTest : public DaemonApiTest {
 protected:
  void SetUp() override {
    Start([](Config& c) {
      c.warm_pool_size = 1;
      c.warm_pool_size_bash = 2;
      c.warm_pool_size_javascript = 0;
    });
  }
  double Pool(const std::string& series, const std::string& pool) {
    return Metric("code_interpreter_warm_pool_" + series + "{pool=\"" + pool + "\"}");
  }
};

TEST_F(WarmPoolsApiTest, EachLanguageHasItsPoolAndMetricsCountHitsMissesAndRefills) {
  ASSERT_TRUE(fake().WaitUntil([](const FakeCounts& c) { return c.prepared == 3; }));
  EXPECT_EQ(Pool("size", "python"), 1);
  EXPECT_EQ(Pool("size", "bash"), 2);
  EXPECT_EQ(Pool("ready", "python"), 1);
  EXPECT_EQ(Pool("ready", "bash"), 2);
  EXPECT_EQ(client().Post("/v1/execute", R"({"code": "x", "language": "bash"})").status, 200);
  EXPECT_EQ(Pool("hits_total", "bash"), 1);
  EXPECT_EQ(Pool("hits_total", "python"), 0);
  ASSERT_TRUE(fake().WaitUntil([](const FakeCounts& c) { return c.prepared == 4; }));
  EXPECT_EQ(Pool("refill_lag_seconds_count", "bash"), 1);
  EXPECT_EQ(Pool("ready", "bash"), 2);

  // The Python pool's refill fails, so the next Python request finds it empty: a miss.
  fake().FailPrepare(Status::Error("no room"), 2);
  EXPECT_EQ(client().Post("/v1/execute", R"({"code": "x"})").status, 200);
  client().Post("/v1/execute", R"({"code": "x"})");  // 500 if its own sandbox failed too
  EXPECT_EQ(Pool("hits_total", "python"), 1);
  EXPECT_EQ(Pool("misses_total", "python"), 1);
  EXPECT_EQ(Pool("misses_total", "bash"), 0);
}

}  // namespace
}  // namespace ci::daemon
