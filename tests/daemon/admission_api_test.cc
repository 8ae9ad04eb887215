// Admission over HTTP against the fake backend (api.md "Overload"): past MAX_CONCURRENT_EXECUTIONS
// a request waits in the queue and runs when a slot frees, or is refused with 429 and
// Retry-After after EXECUTION_QUEUE_TIMEOUT_SEC; a backend out of capacity is 503 with
// Retry-After.
#include <thread>

#include "fake_daemon.h"

namespace ci::daemon {
namespace {

using asio::awaitable;

std::function<void(Config&)> OneSlot(uint32_t queue_timeout_sec) {
  return [queue_timeout_sec](Config& c) {
    c.max_concurrent_executions = 1;
    c.execution_queue_timeout_sec = queue_timeout_sec;
    c.execution_retry_after_sec = 7;
    c.capacity_retry_after_sec = 11;
  };
}

// Every program waits for the gate.
void HoldEveryProgram(FakeExecutor& fake, FakeGate& gate) {
  fake.RunPrograms([&gate](FakeProcess& p) -> awaitable<RunOutcome> {
    co_await p.WaitFor(gate);
    co_return p.Exit(0);
  });
}

// The waits below EXPECT rather than ASSERT: the test must go on to open the gate and join its
// threads whatever happened.
class AdmissionApiTest : public DaemonApiTest {
 protected:
  // A request running on a thread of its own; its reply once joined.
  struct Background {
    std::thread thread;
    HttpReply reply;
  };
  void Send(Background& b) {
    b.thread =
        std::thread([this, &b] { b.reply = client().Post("/v1/execute", R"({"code": "x"})"); });
  }
};

TEST_F(AdmissionApiTest, ARequestPastTheLimitWaitsAndRunsWhenTheSlotFrees) {
  Start(OneSlot(/*queue_timeout_sec=*/30));
  FakeGate gate;
  HoldEveryProgram(fake(), gate);
  Background first, second;
  Send(first);
  EXPECT_TRUE(fake().WaitUntil([](const FakeCounts& c) { return c.runs_started == 1; }));
  Send(second);
  daemon().WaitUntilQueued(1);
  EXPECT_EQ(fake().counts().prepared, 1);  // the queued request has no sandbox yet
  gate.Open();
  first.thread.join();
  second.thread.join();
  EXPECT_EQ(first.reply.status, 200) << first.reply.body;
  EXPECT_EQ(second.reply.status, 200) << second.reply.body;
  EXPECT_EQ(fake().counts().prepared, 2);
  EXPECT_EQ(Metric(R"(code_interpreter_admission_wait_seconds_count{operation="execute"})"), 2);
}

TEST_F(AdmissionApiTest, ARequestQueuedPastTheQueueTimeoutIs429WithRetryAfter) {
  Start(OneSlot(/*queue_timeout_sec=*/1));
  FakeGate gate;
  HoldEveryProgram(fake(), gate);
  Background first;
  Send(first);
  EXPECT_TRUE(fake().WaitUntil([](const FakeCounts& c) { return c.runs_started == 1; }));
  HttpReply refused = client().Post("/v1/execute", R"({"code": "x"})");
  gate.Open();
  first.thread.join();
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(refused.Header("retry-after").value_or(""), "7");
  EXPECT_EQ(Str(Json(refused), "detail"),
            "Execution capacity on this replica is saturated. Retry after the Retry-After delay.");
  EXPECT_EQ(first.reply.status, 200);
  EXPECT_EQ(fake().counts().prepared, 1);
  EXPECT_EQ(
      Metric(
          R"(code_interpreter_executions_rejected_total{operation="execute",status="429",reason="saturated"})"),
      1);
}

TEST_F(AdmissionApiTest, ABackendOutOfCapacityIs503WithRetryAfter) {
  Start(OneSlot(/*queue_timeout_sec=*/30));
  fake().FailPrepare(Status::Unavailable("image", "the executor image is being pulled"));
  HttpReply r = client().Post("/v1/execute", R"({"code": "x"})");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.Header("retry-after").value_or(""), "11");
  EXPECT_EQ(Str(Json(r), "detail"),
            "Executor capacity unavailable (image): the executor image is being pulled");
  EXPECT_EQ(
      Metric(
          R"(code_interpreter_executions_rejected_total{operation="execute",status="503",reason="capacity"})"),
      1);
  // The slot was given back: the next request runs.
  EXPECT_EQ(client().Post("/v1/execute", R"({"code": "x"})").status, 200);
}

TEST_F(AdmissionApiTest, ASandboxThatFailsToStartOtherwiseIs500WithoutRetryAfter) {
  Start(OneSlot(/*queue_timeout_sec=*/30));
  fake().FailPrepare(Status::Error("the runtime is broken"));
  HttpReply r = client().Post("/v1/execute", R"({"code": "x"})");
  EXPECT_EQ(r.status, 500);
  EXPECT_FALSE(r.Header("retry-after").has_value());
  EXPECT_EQ(Str(Json(r), "detail"), "Internal Server Error");
}

}  // namespace
}  // namespace ci::daemon
