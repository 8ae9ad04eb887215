// The REST API of docs/api.md: routing and one handler per endpoint. Handlers speak HttpExchange,
// never Beast.
#pragma once

#include <string>

#include "core/executor.h"
#include "daemon/api/responses.h"
#include "daemon/config/config.h"
#include "daemon/files/file_store.h"
#include "daemon/http/http_exchange.h"
#include "daemon/service/admission.h"
#include "daemon/service/execution_service.h"
#include "daemon/service/metrics.h"
#include "daemon/sessions/session_manager.h"

namespace ci::daemon {

class ApiHandlers {
 public:
  ApiHandlers(const Config& config, Executor& executor, FileStore& store, ExecutionService& service,
              SessionManager& sessions, Admission& admission, Metrics& metrics);
  asio::awaitable<void> Handle(HttpExchange& ex);
  // The cached result of the background backend check, served by /health.
  void SetHealth(Status status) { health_ = std::move(status); }

 private:
  HealthInfo Info(const Status& backend) const;
  asio::awaitable<void> Health(HttpExchange& ex);
  asio::awaitable<void> Ready(HttpExchange& ex);
  asio::awaitable<void> ExecuteBatchRoute(HttpExchange& ex);
  asio::awaitable<void> ExecuteStreamRoute(HttpExchange& ex);
  asio::awaitable<void> Execute(HttpExchange& ex, bool stream);
  // Runs an execution (one-off or in a session) with an output sink and a hook receiving its kill
  // function.
  using KillHook = std::function<void(std::function<void()>)>;
  using Runner = std::function<asio::awaitable<std::variant<ExecutionResult, ApiError>>(
      OutputSink, const KillHook&)>;
  // Each returns the outcome for the metrics: "ok", "timed_out", "error" or "unavailable" (503).
  asio::awaitable<std::string> ExecuteBatch(HttpExchange& ex, const Runner& run);
  asio::awaitable<std::string> ExecuteStream(HttpExchange& ex, const Runner& run);
  // Records an admitted execution's end; "unavailable" counts as a 503 rejection.
  void Finish(const std::string& operation, const std::string& outcome,
              std::chrono::steady_clock::time_point admitted_at);
  // An execution slot, or nullopt after answering 429.
  asio::awaitable<std::optional<Admission::Permit>> Admit(HttpExchange& ex,
                                                          const std::string& operation);
  // {"detail"} with the status; a 503 (no capacity) carries Retry-After.
  HttpResponse ApiErrorResponse(const ApiError& e) const;
  // The body within the request size limit, or nullopt after answering 413/400.
  asio::awaitable<std::optional<std::string>> ReadJsonBody(HttpExchange& ex);

  // Sessions (session_handlers.cc).
  asio::awaitable<void> Sessions(HttpExchange& ex);
  asio::awaitable<void> CreateSession(HttpExchange& ex);
  asio::awaitable<void> ListSessions(HttpExchange& ex);
  asio::awaitable<void> DeleteSession(HttpExchange& ex, const std::string& id);
  asio::awaitable<void> SessionBash(HttpExchange& ex, const std::string& id);
  asio::awaitable<void> SessionExecute(HttpExchange& ex, const std::string& id, bool stream);
  asio::awaitable<void> SessionFiles(HttpExchange& ex, const std::string& id);
  asio::awaitable<void> SessionStageFiles(HttpExchange& ex, const std::string& id);
  asio::awaitable<void> MetricsText(HttpExchange& ex);
  asio::awaitable<void> Languages(HttpExchange& ex);
  asio::awaitable<void> UploadFile(HttpExchange& ex);
  asio::awaitable<void> ListFiles(HttpExchange& ex);
  asio::awaitable<void> GetFile(HttpExchange& ex, const std::string& id);
  asio::awaitable<void> DeleteFile(HttpExchange& ex, const std::string& id);

  const Config& config_;
  Executor& executor_;
  FileStore& store_;
  ExecutionService& service_;
  SessionManager& sessions_;
  Admission& admission_;
  Metrics& metrics_;
  Status health_;
};

}  // namespace ci::daemon
