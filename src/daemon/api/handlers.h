// The REST front (docs/api.md, the onyx-compatible API): one route table (Routes()) and one
// handler set per resource (health_handlers.cc, execute_handlers.cc, file_handlers.cc,
// session_handlers.cc, agent_handlers.cc). Handlers speak HttpExchange, never Beast. It claims
// every request no other front does, answering 404 for paths it does not serve.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "core/executor.h"
#include "daemon/api/responses.h"
#include "daemon/auth/api_keys.h"
#include "daemon/auth/key_quotas.h"
#include "daemon/config/config.h"
#include "daemon/files/file_store.h"
#include "daemon/front/front.h"
#include "daemon/http/http_exchange.h"
#include "daemon/service/admission.h"
#include "daemon/service/execution_service.h"
#include "daemon/service/metrics.h"
#include "daemon/sessions/session_manager.h"
#include "daemon/tools/program_runner.h"
#include "daemon/tools/sandbox_tools.h"
#include "daemon/tools/solve_loop.h"
#include "llm/provider.h"

namespace ci::daemon {

class ApiHandlers final : public Front {
 public:
  // `admission` admits executions, `model_calls` the agent loop's model requests; `quotas` is
  // each API key's share; `runner` runs the tools' programs, `tools` are the sandbox tools
  // (shared with MCP).
  ApiHandlers(const Config& config, Executor& executor, FileStore& store, ExecutionService& service,
              SessionManager& sessions, Admission& admission, Admission& model_calls,
              KeyQuotas& quotas, Metrics& metrics, ProgramRunner& runner, SandboxTools& tools);
  bool Claims(const HttpRequestHead&) const override { return true; }
  asio::awaitable<void> Handle(HttpExchange& ex) override;
  // The cached result of the background backend check, served by /health.
  void SetHealth(Status status) { health_ = std::move(status); }
  // Requests then need a key (docs/api.md "API keys"); nullptr: none do.
  void SetApiKeys(ApiKeys* keys) override { keys_ = keys; }
  // What /health says of the deployment (bootstrap's report, read at each request: a nested
  // dockerd's pid and restarts change).
  void SetDeployment(std::function<DeploymentInfo()> deployment) {
    deployment_ = std::move(deployment);
  }
  // The model of the agent loop (solve, solve_task); nullptr: none configured (503).
  void SetModel(llm::Provider* model);

  // A handler gets the exchange and the value of its path's `{...}` segment ("" when none).
  using Handler = asio::awaitable<void> (ApiHandlers::*)(HttpExchange&, const std::string&);
  struct Route {
    std::string_view method;
    std::string_view pattern;  // routes.h: "/v1/files/{file_id}"
    Handler handler;
  };
  // Every route the API serves, in matching order.
  static std::span<const Route> Routes();

 private:
  // Health and the API's description (health_handlers.cc).
  HealthInfo Info(const Status& backend) const;
  asio::awaitable<void> Health(HttpExchange& ex, const std::string&);
  asio::awaitable<void> Ready(HttpExchange& ex, const std::string&);
  asio::awaitable<void> MetricsText(HttpExchange& ex, const std::string&);
  asio::awaitable<void> Languages(HttpExchange& ex, const std::string&);
  asio::awaitable<void> OpenApi(HttpExchange& ex, const std::string&);

  // One-off executions (execute_handlers.cc).
  asio::awaitable<void> ExecuteBatchRoute(HttpExchange& ex, const std::string&);
  asio::awaitable<void> ExecuteStreamRoute(HttpExchange& ex, const std::string&);
  asio::awaitable<void> Execute(HttpExchange& ex, bool stream);
  // Runs an execution (one-off or in a session) with an output sink and a hook receiving its kill
  // function.
  using KillHook = std::function<void(std::function<void()>)>;
  using Runner = std::function<asio::awaitable<std::variant<ExecutionResult, ApiError>>(
      OutputSink, const KillHook&)>;
  // The batch (JSON) and the stream (SSE) answer of any Runner; each returns the outcome for the
  // metrics.
  asio::awaitable<Outcome> ExecuteBatch(HttpExchange& ex, const Runner& run);
  asio::awaitable<Outcome> ExecuteStream(HttpExchange& ex, const Runner& run);
  asio::awaitable<Outcome> ExecuteEither(HttpExchange& ex, bool stream, const Runner& run);

  // Files (file_handlers.cc).
  asio::awaitable<void> UploadFile(HttpExchange& ex, const std::string&);
  asio::awaitable<void> ListFiles(HttpExchange& ex, const std::string&);
  asio::awaitable<void> GetFile(HttpExchange& ex, const std::string& id);
  asio::awaitable<void> DeleteFile(HttpExchange& ex, const std::string& id);

  // Sessions (session_handlers.cc).
  asio::awaitable<void> CreateSession(HttpExchange& ex, const std::string&);
  asio::awaitable<void> ListSessions(HttpExchange& ex, const std::string&);
  asio::awaitable<void> DeleteSession(HttpExchange& ex, const std::string& id);
  asio::awaitable<void> SessionBash(HttpExchange& ex, const std::string& id);
  asio::awaitable<void> SessionExecuteBatch(HttpExchange& ex, const std::string& id);
  asio::awaitable<void> SessionExecuteStream(HttpExchange& ex, const std::string& id);
  asio::awaitable<void> SessionExecute(HttpExchange& ex, const std::string& id, bool stream);
  asio::awaitable<void> SessionFiles(HttpExchange& ex, const std::string& id);
  asio::awaitable<void> SessionStageFiles(HttpExchange& ex, const std::string& id);
  // Pause, resume, fork and snapshots (session_pause_handlers.cc).
  asio::awaitable<void> PauseSession(HttpExchange& ex, const std::string& id);
  asio::awaitable<void> ResumeSession(HttpExchange& ex, const std::string& id);
  asio::awaitable<void> ForkSession(HttpExchange& ex, const std::string& id);
  asio::awaitable<void> SnapshotSession(HttpExchange& ex, const std::string& id);
  asio::awaitable<void> ListSnapshots(HttpExchange& ex, const std::string&);
  asio::awaitable<void> DeleteSnapshot(HttpExchange& ex, const std::string& id);

  // The tools and the agent loop (agent_handlers.cc).
  asio::awaitable<void> Tools(HttpExchange& ex, const std::string&);
  asio::awaitable<void> SolveBatchRoute(HttpExchange& ex, const std::string&);
  asio::awaitable<void> SolveStreamRoute(HttpExchange& ex, const std::string&);
  asio::awaitable<void> Solve(HttpExchange& ex, bool stream);
  asio::awaitable<void> SolveStream(HttpExchange& ex, const SolveRequest& request);

  // Shared by the handlers (handlers.cc).
  // An execution slot, or nullopt after answering 429.
  asio::awaitable<std::optional<Admission::Permit>> Admit(HttpExchange& ex, Operation op);
  // Records an admitted execution's end.
  void Finish(Operation op, Outcome outcome, std::chrono::steady_clock::time_point admitted_at);
  // {"detail"} with the status; a 503 (no capacity) carries Retry-After.
  HttpResponse ApiErrorResponse(const ApiError& e) const;

  const Config& config_;
  Executor& executor_;
  FileStore& store_;
  ExecutionService& service_;
  SessionManager& sessions_;
  Admission& admission_;
  Admission& model_calls_;
  KeyQuotas& quotas_;
  Metrics& metrics_;
  Status health_;
  ApiKeys* keys_ = nullptr;
  std::function<DeploymentInfo()> deployment_;
  ProgramRunner& runner_;
  SandboxTools& tools_;
  std::unique_ptr<SolveLoop> solver_;  // with a model only
  // Whether a request to `pattern` needs a key (when keys are set): all but the probes.
  bool NeedsKey(std::string_view pattern) const;
};

}  // namespace ci::daemon
