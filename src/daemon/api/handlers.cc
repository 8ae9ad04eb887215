#include "daemon/api/handlers.h"

#include "core/header_text.h"
#include "daemon/api/responses.h"
#include "daemon/api/routes.h"

namespace ci::daemon {
namespace {

// application/json, any case, parameters allowed ("application/json; charset=utf-8").
bool IsJsonContentType(std::string_view type) {
  return EqualsIgnoringCase(TrimHeaderSpace(type.substr(0, type.find(';'))), "application/json");
}

bool IsSessionRoute(std::string_view pattern) { return pattern.starts_with("/v1/sessions"); }
bool IsSessionId(std::string_view id) { return id.starts_with("code-session-"); }

// RFC 6750: a challenge on every 401, with invalid_token when a key was given but is not one.
HttpResponse Unauthorized(const Caller& caller) {
  HttpResponse r = ErrorResponse(401, caller.error);
  r.headers.emplace_back("WWW-Authenticate", caller.wrong_key
                                                 ? "Bearer realm=\"code-interpreter\", "
                                                   "error=\"invalid_token\""
                                                 : "Bearer realm=\"code-interpreter\"");
  return r;
}

}  // namespace

ApiHandlers::ApiHandlers(const Config& config, Executor& executor, FileStore& store,
                         ExecutionService& service, SessionManager& sessions, Admission& admission,
                         Admission& model_calls, KeyQuotas& quotas, Metrics& metrics)
    : config_(config),
      executor_(executor),
      store_(store),
      service_(service),
      sessions_(sessions),
      admission_(admission),
      model_calls_(model_calls),
      quotas_(quotas),
      metrics_(metrics),
      browsers_{config.allowed_origins, config.allowed_hosts, true, config.host} {}

void ApiHandlers::SetApiKeys(ApiKeys* keys) {
  keys_ = keys;
  browsers_.check_host = keys == nullptr;  // a key is what a rebound page lacks
  if (keys != nullptr) keys->OnLoad([this](const std::vector<ApiKey>& k) { quotas_.Set(k); });
}

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
      {"GET", "/v1/tools", &ApiHandlers::Tools},
      {"POST", "/v1/agent/solve", &ApiHandlers::SolveBatchRoute},
      {"POST", "/v1/agent/solve/stream", &ApiHandlers::SolveStreamRoute},
      {"POST", "/mcp", &ApiHandlers::Mcp},
      {"GET", "/mcp", &ApiHandlers::Mcp},
      {"DELETE", "/mcp", &ApiHandlers::Mcp},
  };
  return kRoutes;
}

asio::awaitable<void> ApiHandlers::Handle(HttpExchange& ex) {
  ex.client.clear();  // a kept-alive connection's previous request was someone's
  if (std::optional<std::string> refused = RefuseBrowserRequest(ex.head(), browsers_)) {
    co_return co_await ex.Respond(ErrorResponse(403, *refused));
  }
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
  if (keys_ != nullptr && NeedsKey(route->pattern)) {
    Caller caller = keys_->Authenticate(ex.head().Header("authorization"));
    if (!caller.ok()) co_return co_await ex.Respond(Unauthorized(caller));
    ex.client = std::move(caller.name);
  }
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

asio::awaitable<std::optional<std::string>> ApiHandlers::ReadJsonBody(HttpExchange& ex) {
  const uint64_t limit = config_.max_request_body_mb << 20;
  BodyChunk body = co_await ReadWholeBody(ex, limit);
  if (body.error == BodyError::kTooLarge) {
    co_await ex.Respond(ErrorResponse(
        413,
        "Request body exceeds maximum of " + std::to_string(config_.max_request_body_mb) + " MB"));
    co_return std::nullopt;
  }
  if (body.error != BodyError::kNone) {
    co_await ex.Respond(ErrorResponse(400, "Invalid request body: incomplete body"));
    co_return std::nullopt;
  }
  // No page can send a JSON content type without the CORS preflight the daemon never answers.
  const std::string_view type = ex.head().Header("content-type").value_or("");
  if (!body.data.empty() && !IsJsonContentType(type)) {
    // Named first: GCC 12 destroys a ?: result inside a co_await expression twice.
    const std::string got = type.empty() ? std::string("none") : "'" + std::string(type) + "'";
    co_await ex.Respond(ErrorResponse(415,
                                      "Unsupported Media Type: the body must be JSON sent with "
                                      "'Content-Type: application/json' (got " +
                                          got + ")"));
    co_return std::nullopt;
  }
  co_return std::move(body.data);
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
