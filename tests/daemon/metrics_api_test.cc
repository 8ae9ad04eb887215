// GET /metrics over HTTP after requests ran against the fake backend: the counters and gauges
// follow what the handlers did.
#include "fake_daemon.h"

namespace ci::daemon {
namespace {

using namespace std::chrono_literals;
using asio::awaitable;

class MetricsApiTest : public DaemonApiTest {
 protected:
  void SetUp() override { Start(); }
};

TEST_F(MetricsApiTest, CompletedExecutionsAreCountedByOperationAndOutcome) {
  fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> {
    if (p.ReadFile("__main__.py") == "sleep") co_await p.Sleep(10min);
    co_return p.Exit(p.ReadFile("__main__.py") == "fail" ? 1 : 0);
  });
  client().Post("/v1/execute", R"({"code": "ok"})");
  client().Post("/v1/execute", R"({"code": "fail"})");  // the program's failure is still "ok"
  client().Post("/v1/execute", R"({"code": "sleep", "timeout_ms": 20})");
  client().Post("/v1/execute/stream", R"({"code": "ok"})");
  const std::string completed = "code_interpreter_executions_completed_total";
  EXPECT_EQ(Metric(completed + R"({operation="execute",outcome="ok"})"), 2);
  EXPECT_EQ(Metric(completed + R"({operation="execute",outcome="timed_out"})"), 1);
  EXPECT_EQ(Metric(completed + R"({operation="execute_stream",outcome="ok"})"), 1);
  EXPECT_EQ(Metric(R"(code_interpreter_executions_active{operation="execute"})"), 0);
  EXPECT_EQ(Metric(R"(code_interpreter_execution_duration_seconds_count{operation="execute"})"), 3);
}

TEST_F(MetricsApiTest, RejectedRequestsAreNotCountedAsCompleted) {
  client().Post("/v1/execute", "{}");  // 422: before admission
  EXPECT_EQ(
      Metric(R"(code_interpreter_executions_completed_total{operation="execute",outcome="ok"})"),
      -1);
  EXPECT_EQ(Metric("code_interpreter_executions_limit"), 16);
}

TEST_F(MetricsApiTest, SessionCallsAreCountedUnderTheirOperations) {
  std::string id = Str(Json(client().Post("/v1/sessions", "{}")), "session_id");
  client().Post("/v1/sessions/" + id + "/bash", R"({"cmd": "true"})");
  client().Post("/v1/sessions/" + id + "/execute", R"({"code": "1"})");
  const std::string completed = "code_interpreter_executions_completed_total";
  EXPECT_EQ(Metric(completed + R"({operation="session_create",outcome="ok"})"), 1);
  EXPECT_EQ(Metric(completed + R"({operation="session_bash",outcome="ok"})"), 1);
  EXPECT_EQ(Metric(completed + R"({operation="session_execute",outcome="ok"})"), 1);
  EXPECT_EQ(Metric("code_interpreter_sessions_active"), 1);
}

}  // namespace
}  // namespace ci::daemon
