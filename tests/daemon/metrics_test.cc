#include "daemon/service/metrics.h"

#include <gtest/gtest.h>

namespace ci::daemon {
namespace {

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(Metrics, RendersTheSeriesOfTheApi) {
  Metrics m(16);
  m.Started(Operation::kExecute);
  m.Started(Operation::kExecute);
  m.Finished(Operation::kExecute, Outcome::kOk, 0.07);
  m.Rejected(Operation::kExecute, Rejection::kSaturated);
  m.AdmissionWait(Operation::kExecute, 0.2);
  std::string t = m.Render();
  EXPECT_TRUE(Has(t, "code_interpreter_executions_active{operation=\"execute\"} 1")) << t;
  EXPECT_TRUE(Has(t, "code_interpreter_executions_active{operation=\"session_bash\"} 0")) << t;
  EXPECT_TRUE(Has(t, "code_interpreter_executions_limit 16")) << t;
  EXPECT_TRUE(Has(t,
                  "code_interpreter_executions_rejected_total{operation=\"execute\","
                  "status=\"429\",reason=\"saturated\"} 1"))
      << t;
  EXPECT_TRUE(Has(t,
                  "code_interpreter_executions_completed_total{operation=\"execute\","
                  "outcome=\"ok\"} 1"))
      << t;
  EXPECT_TRUE(Has(t, "# TYPE code_interpreter_execution_duration_seconds histogram")) << t;
}

TEST(Metrics, TheBackendsOwnFiguresAreReadAtEachScrape) {
  Metrics m(4);
  double restarts = 0;
  m.ReadBackendWith([&restarts] {
    return std::vector<BackendMetric>{
        {"code_interpreter_fork_server_restarts_total", "counter", "Restarts.", restarts}};
  });
  EXPECT_TRUE(Has(m.Render(), "code_interpreter_fork_server_restarts_total 0"));
  restarts = 2;
  std::string t = m.Render();
  EXPECT_TRUE(Has(t, "# TYPE code_interpreter_fork_server_restarts_total counter")) << t;
  EXPECT_TRUE(Has(t, "code_interpreter_fork_server_restarts_total 2")) << t;
}

TEST(Metrics, AnUnavailableExecutionIsACapacityRejectionAndAnError) {
  Metrics m(4);
  m.Started(Operation::kSessionExecute);
  m.Finished(Operation::kSessionExecute, Outcome::kUnavailable, 0.01);
  std::string t = m.Render();
  EXPECT_TRUE(Has(t,
                  "code_interpreter_executions_rejected_total{operation=\"session_execute\","
                  "status=\"503\",reason=\"capacity\"} 1"))
      << t;
  EXPECT_TRUE(Has(t,
                  "code_interpreter_executions_completed_total{operation=\"session_execute\","
                  "outcome=\"error\"} 1"))
      << t;
  EXPECT_TRUE(Has(t, "code_interpreter_executions_active{operation=\"session_execute\"} 0")) << t;
}

TEST(Metrics, HistogramBucketsAreCumulative) {
  Histogram h({0.1, 1});
  h.Observe(0.05);
  h.Observe(0.5);
  h.Observe(0.5);
  h.Observe(5);
  std::string out;
  h.Render(out, "x", "op=\"a\"");
  EXPECT_TRUE(Has(out, "x_bucket{op=\"a\",le=\"0.1\"} 1")) << out;
  EXPECT_TRUE(Has(out, "x_bucket{op=\"a\",le=\"1\"} 3")) << out;
  EXPECT_TRUE(Has(out, "x_bucket{op=\"a\",le=\"+Inf\"} 4")) << out;
  EXPECT_TRUE(Has(out, "x_sum{op=\"a\"} 6.05")) << out;
  EXPECT_TRUE(Has(out, "x_count{op=\"a\"} 4")) << out;
}

}  // namespace
}  // namespace ci::daemon
