#include "daemon/api/handlers.h"

#include "daemon/api/responses.h"
#include "daemon/front/request_steps.h"
#include "daemon/front/routes.h"

namespace ci::daemon {
namespace {

bool IsSessionRoute(std::string_view pattern) {
  return pattern.starts_with("/v1/sessions") || pattern.starts_with("/v1/snapshots");
}
bool IsSessionId(std::string_view id) { return id.starts_with("code-session-"); }

}  // namespace

ApiHandlers::ApiHandlers(const Config& config, Executor& executor, FileStore& store,
                         ExecutionService& service, SessionManager& sessions, Admission& admission,
                         Admission& model_calls, KeyQuotas& quotas, Metrics& metrics,
                         ProgramRunner& runner, SandboxTools& tools)
    : config_(config),
      executor_(executor),
      store_(store),
      service_(service),
      sessions_(sessions),
      admission_(admission),
      model_calls_(model_calls),
      quotas_(quotas),
      metrics_(metrics),
      runner_(runner),
      tools_(tools) {}

std::span<const ApiHandlers::Route> ApiHandlers::Routes() {
  static const Route kRoutes[] = {
      {"GET", "/health", &ApiHandlers::Health},
      {"GET", "/ready", &ApiHandlers::Ready},
      {"GET", "/metrics", &ApiHandlers::MetricsText},
      {"GET", "/openapi.json", &ApiHandlers::OpenApi},
      {"GET", "/v1/languages", &ApiHandlers::Languages},
      {"POST", "/v1/execute", &ApiHandlers::ExecuteBatchRoute},
      {"POST", "/v1/execute/stream", &ApiHandlers::ExecuteStreamRoute},
      {"POST", "/v1/files", &ApiHandlers::UploadFile},
      {"GET", "/v1/files", &ApiHandlers::ListFiles},
      {"GET", "/v1/files/{file_id}", &ApiHandlers::GetFile},
      {"DELETE", "/v1/files/{file_id}", &ApiHandlers::DeleteFile},
      {"POST", "/v1/sessions", &ApiHandlers::CreateSession},
      {"GET", "/v1/sessions", &ApiHandlers::ListSessions},
      {"DELETE", "/v1/sessions/{session_id}", &ApiHandlers::DeleteSession},
      {"POST", "/v1/sessions/{session_id}/bash", &ApiHandlers::SessionBash},
      {"POST", "/v1/sessions/{session_id}/execute", &ApiHandlers::SessionExecuteBatch},
      {"POST", "/v1/sessions/{session_id}/execute/stream", &ApiHandlers::SessionExecuteStream},
      {"GET", "/v1/sessions/{session_id}/files", &ApiHandlers::SessionFiles},
      {"POST", "/v1/sessions/{session_id}/files", &ApiHandlers::SessionStageFiles},
      {"POST", "/v1/sessions/{session_id}/pause", &ApiHandlers::PauseSession},
      {"POST", "/v1/sessions/{session_id}/resume", &ApiHandlers::ResumeSession},
      {"POST", "/v1/sessions/{session_id}/fork", &ApiHandlers::ForkSession},
      {"POST", "/v1/sessions/{session_id}/snapshots", &ApiHandlers::SnapshotSession},
      {"GET", "/v1/snapshots", &ApiHandlers::ListSnapshots},
      {"DELETE", "/v1/snapshots/{snapshot_id}", &ApiHandlers::DeleteSnapshot},
      {"GET", "/v1/tools", &ApiHandlers::Tools},
      {"POST", "/v1/agent/solve", &ApiHandlers::SolveBatchRoute},
      {"POST", "/v1/agent/solve/stream", &ApiHandlers::SolveStreamRoute},
  };
  return kRoutes;
}

asio::awaitable<void> ApiHandlers::Handle(HttpExchange& ex) {
  const std::string& path = ex.head().path;
  const std::string& method = ex.head().method;
  const Route* route = nullptr;
  std::string value, allowed;
  bool session_path = false;
  for (const Route& r : Routes()) {
    std::optional<std::string> v = MatchPath(r.pattern, path);
    if (!v) continue;
    session_path = IsSessionRoute(r.pattern);
    if (r.method == method) {
      route = &r;
      value = std::move(*v);
    }
    allowed += (allowed.empty() ? "" : ", ") + std::string(r.method);
  }
  if (allowed.empty()) co_return co_await ex.Respond(ErrorResponse(404, "Not Found"));
  if (session_path && !sessions_.supported()) {
    co_return co_await ex.Respond(ErrorResponse(
        501, "Sessions are not supported by the '" + std::string(executor_.name()) + "' backend."));
  }
  if (route == nullptr) co_return co_await ex.Respond(MethodNotAllowed(allowed));
  if (NeedsKey(route->pattern) && !co_await Authenticate(keys_, ex)) co_return;
  // A malformed session id is a session that does not exist, in the sessions' own words.
  if (route->pattern.find("{session_id}") != std::string_view::npos && !IsSessionId(value)) {
    co_return co_await ex.Respond(ApiErrorResponse(SessionManager::NotFound(value)));
  }
  co_await (this->*route->handler)(ex, value);
}

bool ApiHandlers::NeedsKey(std::string_view pattern) const {
  if (pattern == "/health" || pattern == "/ready" || pattern == "/openapi.json") return false;
  return pattern != "/metrics" || config_.metrics_require_api_key;
}

HttpResponse ApiHandlers::ApiErrorResponse(const ApiError& e) const {
  HttpResponse r = ErrorResponse(e.status, e.detail);
  if (e.status == 503) {
    r.headers.emplace_back("Retry-After", std::to_string(config_.capacity_retry_after_sec));
  }
  return r;
}

asio::awaitable<std::optional<Admission::Permit>> ApiHandlers::Admit(HttpExchange& ex,
                                                                     Operation op) {
  auto queued_at = std::chrono::steady_clock::now();
  std::optional<Admission::Permit> permit = co_await admission_.Acquire(ex.client);
  metrics_.AdmissionWait(
      op, std::chrono::duration<double>(std::chrono::steady_clock::now() - queued_at).count());
  if (!permit) {
    metrics_.Rejected(op, Rejection::kSaturated);
    HttpResponse r =
        ErrorResponse(admission_.RefusalStatus(ex.client), admission_.ExecutionRefusal(ex.client));
    if (r.status == 429) {
      r.headers.emplace_back("Retry-After", std::to_string(config_.execution_retry_after_sec));
    }
    co_await ex.Respond(std::move(r));
  }
  co_return permit;
}

void ApiHandlers::Finish(Operation op, Outcome outcome,
                         std::chrono::steady_clock::time_point admitted_at) {
  metrics_.Finished(
      op, outcome,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - admitted_at).count());
}

}  // namespace ci::daemon
