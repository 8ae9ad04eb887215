#include "daemon/tools/program_runner.h"

#include "daemon/service/output_buffer.h"
#include "daemon/service/verdict.h"

namespace ci::daemon {

boost::asio::awaitable<std::variant<ProgramResult, ApiError>> ProgramRunner::Run(
    const ProgramRequest& request, OutputSink on_output) {
  const Config& config = service_.config();
  if (request.timeout_ms < 1 || request.timeout_ms > config.max_exec_timeout_ms) {
    co_return ApiError{
        422, "timeout_ms must be between 1 and " + std::to_string(config.max_exec_timeout_ms)};
  }
  // Held until the run ends; none without admission (the CLI). No co_await inside ?: (GCC 12
  // destroys such a result twice) and no assignment (a Permit is move-constructible only).
  auto acquire = [&]() -> boost::asio::awaitable<std::optional<Admission::Permit>> {
    if (admission_ == nullptr) co_return std::nullopt;
    co_return co_await admission_->Acquire(request.client);
  };
  std::optional<Admission::Permit> permit = co_await acquire();
  if (admission_ != nullptr && !permit) {
    co_return ApiError{admission_->RefusalStatus(request.client),
                       admission_->ExecutionRefusal(request.client)};
  }
  co_await service_.ProbedLanguages();
  ExecuteRequest execute;
  execute.code = request.code;
  execute.language = request.language;
  execute.stdin_data = request.stdin_data;
  execute.timeout_ms = request.timeout_ms;
  execute.last_line_interactive = false;  // a program, not a notebook cell
  auto plan = service_.Plan(execute, request.client);
  if (auto* err = std::get_if<ApiError>(&plan)) co_return *err;

  CappedOutput out(config.max_output_bytes), err(config.max_output_bytes);
  OutputSink sink = [&](StreamKind kind, std::string_view data) {
    (kind == StreamKind::kStdout ? out : err).Append(data);
    if (on_output) on_output(kind, data);
  };
  auto no_kill_hook = [](std::function<void()>) {};
  auto outcome = co_await service_.Execute(std::move(std::get<ExecutionPlan>(plan)),
                                           std::move(sink), no_kill_hook);
  if (auto* e = std::get_if<ApiError>(&outcome)) co_return *e;
  auto& executed = std::get<ExecutionResult>(outcome);
  ProgramResult result;
  result.stdout_text = out.Text();
  result.stderr_text = err.Text();
  result.exit_code = executed.run.exit_code;
  result.signal = executed.run.signal;
  result.timed_out = executed.run.timed_out;
  result.verdict =
      VerdictName(ComputeVerdict(executed.run, executed.resources,
                                 out.truncated() || err.truncated(), config.cpu_time_limit_sec));
  result.duration_ms = executed.run.duration_ms;
  result.files = std::move(executed.files);
  result.results = std::move(executed.results);
  co_return result;
}

}  // namespace ci::daemon
