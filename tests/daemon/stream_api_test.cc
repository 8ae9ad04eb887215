// POST /v1/execute/stream over HTTP against the fake backend: SSE framing, the order of output
// events, the final result event, capping without a marker, and failures as an error event.
#include "fake_daemon.h"

namespace ci::daemon {
namespace {

using asio::awaitable;

class StreamApiTest : public DaemonApiTest {
 protected:
  void SetUp() override {
    Start([](Config& c) { c.max_output_bytes = 100; });
  }
  std::vector<SseEvent> Stream(const std::string& body) {
    HttpReply r = client().Post("/v1/execute/stream", body);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.Header("content-type").value_or("").rfind("text/event-stream", 0), 0u);
    return SseEvents(r.body);
  }
};

TEST_F(StreamApiTest, OutputEventsComeInTheOrderWrittenThenTheResult) {
  fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> {
    p.Stdout("one");
    p.Stderr("two");
    p.Stdout("three");
    co_return p.Exit(0);
  });
  auto events = Stream(R"({"code": "x"})");
  ASSERT_EQ(events.size(), 4u);
  const char* expected[][2] = {{"stdout", "one"}, {"stderr", "two"}, {"stdout", "three"}};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(events[i].event, "output");
    rapidjson::Document d;
    d.Parse(events[i].data.c_str());
    ASSERT_TRUE(d.IsObject()) << events[i].data;
    EXPECT_EQ(Str(d, "stream"), expected[i][0]);
    EXPECT_EQ(Str(d, "data"), expected[i][1]);
  }
  EXPECT_EQ(events[3].event, "result");
  rapidjson::Document result;
  result.Parse(events[3].data.c_str());
  ASSERT_TRUE(result.IsObject()) << events[3].data;
  EXPECT_EQ(result["exit_code"].GetInt(), 0);
  EXPECT_EQ(Str(result, "verdict"), "ok");
  EXPECT_FALSE(result.HasMember("stdout"));  // the output went out as events
}

TEST_F(StreamApiTest, OutputPastTheCapIsDroppedWithoutAMarker) {
  fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> {
    p.WriteInChunks(StreamKind::kStdout, std::string(1000, 'y'), 30);
    co_return p.Exit(0);
  });
  auto events = Stream(R"({"code": "x"})");
  ASSERT_FALSE(events.empty());
  std::string streamed;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    ASSERT_EQ(events[i].event, "output");
    rapidjson::Document d;
    d.Parse(events[i].data.c_str());
    streamed += Str(d, "data");
  }
  EXPECT_EQ(streamed, std::string(100, 'y'));
  ASSERT_EQ(events.back().event, "result");
  rapidjson::Document result;
  result.Parse(events.back().data.c_str());
  EXPECT_TRUE(result["stdout_truncated"].GetBool());
  EXPECT_EQ(Str(result, "verdict"), "output_limit");
}

TEST_F(StreamApiTest, ASandboxThatCannotStartEndsTheStreamWithAnErrorEvent) {
  fake().FailPrepare(Status::Error("no runtime"));
  auto events = Stream(R"({"code": "x"})");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].event, "error");
  EXPECT_EQ(events[0].data, R"({"message":"Internal Server Error"})");
}

TEST_F(StreamApiTest, AClientThatLeavesMidStreamHasItsSandboxKilledAndDestroyed) {
  fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> {
    p.Stdout("started");
    co_await p.Sleep(std::chrono::minutes(10));
    co_return p.Exit(0);
  });
  ASSERT_TRUE(
      LeaveWhileTheProgramRuns("/v1/execute/stream", R"({"code": "wait", "timeout_ms": 60000})"));
  EXPECT_EQ(fake().counts().killed, 1);
  EXPECT_EQ(
      Metric(
          R"(code_interpreter_executions_completed_total{operation="execute_stream",outcome="error"})"),
      1);
}

}  // namespace
}  // namespace ci::daemon
