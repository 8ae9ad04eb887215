// GET /v1/tools, POST /v1/agent/solve and /v1/agent/solve/stream: the tools a model calls and
// the agent loop behind solve_task.
#include "core/json.h"
#include "daemon/api/handlers.h"
#include "daemon/api/request_parsing.h"
#include "daemon/api/sse_stream.h"
#include "daemon/front/request_steps.h"
#include "daemon/front/routes.h"
#include "daemon/http/sse.h"
#include "daemon/service/output_buffer.h"
#include "daemon/tools/solve_json.h"
#include "daemon/tools/tool_declarations.h"

namespace ci::daemon {
namespace {

std::string ProgramEventJson(const Attempt& a) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    w.Key("attempt");
    w.Int(a.number);
    WriteField(w, "code", a.code);
    WriteModelCost(w, a);
    w.EndObject();
  });
}

std::string OutputEventJson(int attempt, bool is_stderr, std::string_view text) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    w.Key("attempt");
    w.Int(attempt);
    WriteField(w, "stream", is_stderr ? "stderr" : "stdout");
    WriteField(w, "data", text);
    w.EndObject();
  });
}

// {"status", "detail", "attempts"}: the stream's `error` event.
std::string ErrorEventJson(const SolveOutcome& outcome) {
  std::string body = SolveErrorJson(outcome);
  return "{\"status\":" + std::to_string(outcome.error->status) + "," + body.substr(1);
}

}  // namespace

void ApiHandlers::SetModel(llm::Provider* model) {
  solver_ = model ? std::make_unique<SolveLoop>(*model, runner_, &model_calls_) : nullptr;
  tools_.SetSolver(solver_.get());
}

asio::awaitable<void> ApiHandlers::Tools(HttpExchange& ex, const std::string&) {
  std::string name = QueryParameter(ex.head().target, "format").value_or("openai");
  std::optional<ToolFormat> format = ParseToolFormat(name);
  if (!format) {
    co_return co_await ex.Respond(
        ErrorResponse(422, "Unknown format '" + name + "': use openai or gemini."));
  }
  co_await service_.ProbedLanguages();  // the declarations list the languages that run
  co_await ex.Respond(JsonResponse(200, ToolsJson(*format, tools_.Declarations())));
}

asio::awaitable<void> ApiHandlers::SolveBatchRoute(HttpExchange& ex, const std::string&) {
  co_await Solve(ex, /*stream=*/false);
}

asio::awaitable<void> ApiHandlers::SolveStreamRoute(HttpExchange& ex, const std::string&) {
  co_await Solve(ex, /*stream=*/true);
}

asio::awaitable<void> ApiHandlers::Solve(HttpExchange& ex, bool stream) {
  std::optional<std::string> body = co_await ReadJsonBody(ex, config_.max_request_body_mb);
  if (!body) co_return;
  auto request = ParseSolveRequest(*body, config_.max_exec_timeout_ms);
  if (!request.ok()) co_return co_await ex.Respond(ErrorResponse(422, request.status().message()));
  if (!solver_) {
    // Named first: GCC 12 miscompiles braced temporaries in a co_await expression.
    const ApiError no_model{
        503,
        "No model is configured on this daemon: start it with LLM_PROVIDER (openai or gemini), "
        "LLM_MODEL, LLM_BASE_URL and LLM_API_KEY or LLM_API_KEY_FILE (docs/agent.md \"The "
        "agent loop\")."};
    co_return co_await ex.Respond(ApiErrorResponse(no_model));
  }
  const auto* languages = co_await service_.ProbedLanguages();
  auto program = BuildProgram(request->language, false, config_.cpu_time_limit_sec, *languages);
  if (!program.ok()) co_return co_await ex.Respond(ErrorResponse(422, program.status().message()));
  request->client = ex.client;
  if (stream) co_return co_await SolveStream(ex, *request);

  bool gone = false;
  ex.WatchClient([&] { gone = true; });
  SolveHooks hooks;
  hooks.abandoned = [&] { return gone; };
  SolveOutcome outcome = co_await solver_->Solve(*request, hooks);
  co_await ex.UnwatchClient();
  if (outcome.error) {
    HttpResponse r = ApiErrorResponse(*outcome.error);
    r.body = SolveErrorJson(outcome);
    co_return co_await ex.Respond(std::move(r));
  }
  co_await ex.Respond(
      JsonResponse(200, SolveOutcomeJson(outcome, *request, solver_->model().model())));
}

asio::awaitable<void> ApiHandlers::SolveStream(HttpExchange& ex, const SolveRequest& request) {
  SseStream stream(ex);
  if (!co_await stream.Begin()) co_return;
  ex.WatchClient([&] { stream.MarkGone(); });
  // Each attempt's output as UTF-8 text within the output limit, as /v1/execute/stream sends it.
  std::optional<Utf8Stream> out, err;
  auto flush = [&](int attempt) {
    for (bool is_stderr : {false, true}) {
      std::string rest = (is_stderr ? err : out)->Flush();
      if (!rest.empty()) stream.Push(SseFrame("output", OutputEventJson(attempt, is_stderr, rest)));
    }
  };
  SolveHooks hooks;
  hooks.program = [&](const Attempt& a) {
    out.emplace(config_.max_output_bytes);
    err.emplace(config_.max_output_bytes);
    stream.Push(SseFrame("program", ProgramEventJson(a)));
  };
  hooks.output = [&](int attempt, StreamKind kind, std::string_view data) {
    bool is_stderr = kind == StreamKind::kStderr;
    std::string text = (is_stderr ? err : out)->Push(data);
    if (!text.empty()) stream.Push(SseFrame("output", OutputEventJson(attempt, is_stderr, text)));
  };
  hooks.attempt = [&](const Attempt& a) {
    flush(a.number);
    stream.Push(SseFrame("attempt", AttemptJson(a)));
  };
  hooks.abandoned = [&] { return stream.gone(); };
  SolveOutcome outcome = co_await solver_->Solve(request, hooks);
  co_await ex.UnwatchClient();
  if (outcome.error) {
    stream.Push(SseFrame("error", ErrorEventJson(outcome)));
  } else {
    stream.Push(SseFrame("result", SolveOutcomeJson(outcome, request, solver_->model().model())));
  }
  co_await stream.Finish();
}

}  // namespace ci::daemon
