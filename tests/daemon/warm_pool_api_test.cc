// The warm pool in front of the fake backend (WARM_POOL_SIZE): a request takes a sandbox prepared
// before it came, the pool refills, sessions take sandboxes of their own, and shutdown destroys
// what the pool held.
#include <set>

#include "fake_daemon.h"

namespace ci::daemon {
namespace {

using asio::awaitable;

class WarmPoolApiTest : public DaemonApiTest {
 protected:
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
