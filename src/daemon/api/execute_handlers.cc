// POST /v1/execute and /v1/execute/stream, and the batch/stream answer sessions share.
#include "core/json.h"
#include "daemon/api/handlers.h"
#include "daemon/api/request_parsing.h"
#include "daemon/api/responses.h"
#include "daemon/api/sse_stream.h"
#include "daemon/front/request_steps.h"
#include "daemon/http/sse.h"
#include "daemon/service/output_buffer.h"
#include "daemon/service/verdict.h"

namespace ci::daemon {
namespace {

// The metrics' outcome of an execution that ran: the program's own failure is still "ok" for
// the service; only a timeout is told apart.
Outcome OutcomeOf(const ExecutionResult& result) {
  return result.run.timed_out ? Outcome::kTimedOut : Outcome::kOk;
}

// An execution that did not run: refused for capacity (503) or failed.
Outcome OutcomeOf(const ApiError& e) {
  return e.status == 503 ? Outcome::kUnavailable : Outcome::kError;
}

}  // namespace

asio::awaitable<void> ApiHandlers::ExecuteBatchRoute(HttpExchange& ex, const std::string&) {
  co_await Execute(ex, /*stream=*/false);
}

asio::awaitable<void> ApiHandlers::ExecuteStreamRoute(HttpExchange& ex, const std::string&) {
  co_await Execute(ex, /*stream=*/true);
}

asio::awaitable<void> ApiHandlers::Execute(HttpExchange& ex, bool stream) {
  std::optional<std::string> body = co_await ReadJsonBody(ex, config_.max_request_body_mb);
  if (!body) co_return;
  auto request = ParseExecuteRequest(*body, config_.max_exec_timeout_ms);
  if (!request.ok()) co_return co_await ex.Respond(ErrorResponse(422, request.status().message()));

  const Operation op = stream ? Operation::kExecuteStream : Operation::kExecute;
  std::optional<Admission::Permit> permit = co_await Admit(ex, op);
  if (!permit) co_return;
  auto admitted_at = std::chrono::steady_clock::now();

  co_await service_.ProbedLanguages();  // a language the startup probe drops is a 422, not a run
  auto plan = service_.Plan(*request, ex.client);
  if (auto* err = std::get_if<ApiError>(&plan)) {
    co_return co_await ex.Respond(ErrorResponse(err->status, err->detail));
  }
  auto& p = std::get<ExecutionPlan>(plan);
  metrics_.Started(op);
  Runner run = [this, &p](OutputSink sink, const KillHook& on_sandbox) {
    return service_.Execute(std::move(p), std::move(sink), on_sandbox);
  };
  Outcome outcome = co_await ExecuteEither(ex, stream, run);
  Finish(op, outcome, admitted_at);
}

asio::awaitable<Outcome> ApiHandlers::ExecuteEither(HttpExchange& ex, bool stream,
                                                    const Runner& run) {
  // No co_await inside ?: — GCC 12 destroys the result of such an expression twice.
  if (stream) co_return co_await ExecuteStream(ex, run);
  co_return co_await ExecuteBatch(ex, run);
}

asio::awaitable<Outcome> ApiHandlers::ExecuteBatch(HttpExchange& ex, const Runner& run) {
  CappedOutput out(config_.max_output_bytes), err(config_.max_output_bytes);
  OutputSink sink = [&](StreamKind kind, std::string_view data) {
    (kind == StreamKind::kStdout ? out : err).Append(data);
  };
  std::function<void()> kill;
  bool gone = false;
  ex.WatchClient([&] {
    gone = true;
    if (kill) kill();
  });
  KillHook on_sandbox = [&](std::function<void()> k) {
    kill = std::move(k);
    if (gone) kill();
  };
  auto outcome = co_await run(std::move(sink), on_sandbox);
  co_await ex.UnwatchClient();
  if (auto* e = std::get_if<ApiError>(&outcome)) {
    co_await ex.Respond(ApiErrorResponse(*e));
    co_return OutcomeOf(*e);
  }
  const auto& result = std::get<ExecutionResult>(outcome);
  std::string stdout_text = out.Text(), stderr_text = err.Text();
  OutputSummary summary{
      &stdout_text, &stderr_text, out.truncated(), err.truncated(),
      ComputeVerdict(result.run, result.resources, out.truncated() || err.truncated(),
                     config_.cpu_time_limit_sec)};
  co_await ex.Respond(JsonResponse(200, ExecuteResultJson(result, summary)));
  co_return OutcomeOf(result);
}

asio::awaitable<Outcome> ApiHandlers::ExecuteStream(HttpExchange& ex, const Runner& run) {
  SseStream stream(ex);
  if (!co_await stream.Begin()) co_return Outcome::kError;
  Utf8Stream out(config_.max_output_bytes), err(config_.max_output_bytes);
  std::function<void()> kill;
  stream.OnGone([&] {
    if (kill) kill();
  });
  auto push = [&](bool is_stderr, const std::string& text) {
    if (!text.empty()) stream.Push(SseFrame("output", SseOutputData(is_stderr, text)));
  };
  ex.WatchClient([&] { stream.MarkGone(); });
  OutputSink sink = [&](StreamKind kind, std::string_view data) {
    bool is_stderr = kind == StreamKind::kStderr;
    push(is_stderr, (is_stderr ? err : out).Push(data));
  };
  KillHook on_sandbox = [&](std::function<void()> k) {
    kill = std::move(k);
    if (stream.gone()) kill();
  };
  auto outcome = co_await run(std::move(sink), on_sandbox);
  co_await ex.UnwatchClient();
  push(false, out.Flush());
  push(true, err.Flush());
  Outcome metric_outcome = Outcome::kError;
  if (auto* e = std::get_if<ApiError>(&outcome)) {
    metric_outcome = OutcomeOf(*e);
    stream.Push(SseFrame("error", "{\"message\":" + JsonQuote(e->detail) + "}"));
  } else {
    const auto& result = std::get<ExecutionResult>(outcome);
    metric_outcome = OutcomeOf(result);
    bool truncated = out.truncated() || err.truncated();
    OutputSummary summary{
        nullptr, nullptr, out.truncated(), err.truncated(),
        ComputeVerdict(result.run, result.resources, truncated, config_.cpu_time_limit_sec)};
    stream.Push(SseFrame("result", ExecuteResultJson(result, summary)));
  }
  co_await stream.Finish();
  co_return metric_outcome;
}

}  // namespace ci::daemon
