// POST /v1/execute over HTTP against the fake backend: what the program wrote and how it ended,
// the verdicts, output capping, and a client that leaves.
#include <csignal>

#include "fake_daemon.h"

namespace ci::daemon {
namespace {

using namespace std::chrono_literals;
using asio::awaitable;

class ExecuteApiTest : public DaemonApiTest {
 protected:
  void SetUp() override { Start(); }
  rapidjson::Document Execute(const std::string& body, int expect_status = 200) {
    HttpReply r = client().Post("/v1/execute", body);
    EXPECT_EQ(r.status, expect_status) << r.body;
    return Json(r);
  }
};

TEST_F(ExecuteApiTest, AnswersWhatTheProgramWroteAndItsExitCode) {
  // The program echoes its entrypoint (the request's code, staged by the daemon) and fails.
  fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> {
    p.Stdout(p.ReadFile("__main__.py"));
    p.Stderr("warning\n");
    co_return p.Exit(3);
  });
  auto j = Execute(R"j({"code": "print('hi')"})j");
  EXPECT_EQ(Str(j, "stdout"), "print('hi')");
  EXPECT_EQ(Str(j, "stderr"), "warning\n");
  EXPECT_EQ(j["exit_code"].GetInt(), 3);
  EXPECT_FALSE(j["timed_out"].GetBool());
  EXPECT_EQ(Str(j, "verdict"), "error");
  EXPECT_EQ(fake().counts().prepared, 1);
}

TEST_F(ExecuteApiTest, ASuccessfulProgramIsOk) {
  auto j = Execute(R"({"code": "pass"})");
  EXPECT_EQ(j["exit_code"].GetInt(), 0);
  EXPECT_EQ(Str(j, "verdict"), "ok");
  EXPECT_FALSE(j["stdout_truncated"].GetBool());
}

TEST_F(ExecuteApiTest, TheProgramGetsTheLanguagesArgvAndTheRequestsStdin) {
  fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> {
    p.Stdout(p.payload().argv.at(0) + " " + p.payload().argv.back() + "|" +
             p.payload().stdin_data.value_or("<none>"));
    co_return p.Exit(0);
  });
  auto j = Execute(R"({"code": "x", "language": "bash", "stdin": "in put"})");
  EXPECT_EQ(Str(j, "stdout"), "/bin/bash /workspace/__main__.sh|in put");
}

TEST_F(ExecuteApiTest, AProgramPastItsTimeoutIsTimedOutWithoutExitCode) {
  fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> {
    p.Stdout("before\n");
    co_await p.Sleep(10min);  // cut at the request's timeout
    p.Stdout("after\n");
    co_return p.Exit(0);
  });
  auto j = Execute(R"({"code": "sleep", "timeout_ms": 50})");
  EXPECT_TRUE(j["timed_out"].GetBool());
  EXPECT_TRUE(j["exit_code"].IsNull());
  EXPECT_EQ(Str(j, "verdict"), "timed_out");
  EXPECT_EQ(Str(j, "stdout"), "before\n");
}

TEST_F(ExecuteApiTest, AnOomKillIsMemoryLimit) {
  fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> { co_return p.OomKill(); });
  auto j = Execute(R"({"code": "big"})");
  EXPECT_EQ(Str(j, "verdict"), "memory_limit");
  EXPECT_TRUE(j["exit_code"].IsNull());
}

TEST_F(ExecuteApiTest, AFailureAfterARefusedForkIsPidsLimit) {
  fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> { co_return p.HitPidsLimit(1); });
  auto j = Execute(R"({"code": "fork"})");
  EXPECT_EQ(Str(j, "verdict"), "pids_limit");
  EXPECT_EQ(j["exit_code"].GetInt(), 1);
}

TEST_F(ExecuteApiTest, AProgramKilledByASignalIsKilled) {
  fake().RunPrograms(
      [](FakeProcess& p) -> awaitable<RunOutcome> { co_return p.KilledBy(SIGSEGV); });
  auto j = Execute(R"({"code": "crash"})");
  EXPECT_EQ(Str(j, "verdict"), "killed");
}

// MAX_OUTPUT_BYTES=100.
class ExecuteApiOutputLimitTest : public DaemonApiTest {
 protected:
  void SetUp() override {
    Start([](Config& c) { c.max_output_bytes = 100; });
  }
};

TEST_F(ExecuteApiOutputLimitTest, OutputPastTheCapIsCutWithAMarker) {
  fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> {
    p.WriteInChunks(StreamKind::kStdout, std::string(1000, 'x'), 7);
    p.Stderr("short");
    co_return p.Exit(0);
  });
  HttpReply r = client().Post("/v1/execute", R"({"code": "spam"})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = Json(r);
  EXPECT_TRUE(j["stdout_truncated"].GetBool());
  EXPECT_FALSE(j["stderr_truncated"].GetBool());
  EXPECT_EQ(Str(j, "stdout"), std::string(100 - 32, 'x') + "\n...[truncated]");
  EXPECT_EQ(Str(j, "stderr"), "short");
  EXPECT_EQ(Str(j, "verdict"), "output_limit");
}

TEST_F(ExecuteApiTest, AClientThatLeavesHasItsSandboxKilledAndDestroyed) {
  fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> {
    co_await p.Sleep(10min);
    co_return p.Exit(0);
  });
  ASSERT_TRUE(LeaveWhileTheProgramRuns("/v1/execute", R"({"code": "wait", "timeout_ms": 60000})"));
  EXPECT_EQ(fake().counts().killed, 1);
  EXPECT_EQ(fake().counts().live(), 0);
  EXPECT_EQ(
      Metric(R"(code_interpreter_executions_completed_total{operation="execute",outcome="error"})"),
      1);
}

}  // namespace
}  // namespace ci::daemon
