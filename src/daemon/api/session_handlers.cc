// The /v1/sessions endpoints of docs/api.md ("Sessions"), on top of SessionManager.
#include <spdlog/spdlog.h>

#include "daemon/api/handlers.h"
#include "daemon/api/request_parsing.h"
#include "daemon/api/responses.h"
#include "daemon/service/output_buffer.h"
#include "daemon/service/verdict.h"

namespace ci::daemon {
namespace {

constexpr std::string_view kPrefix = "/v1/sessions/";

bool IsSessionId(std::string_view id) { return id.rfind("code-session-", 0) == 0; }

}  // namespace

asio::awaitable<void> ApiHandlers::Sessions(HttpExchange& ex) {
  const std::string& path = ex.head().path;
  const std::string& method = ex.head().method;
  if (!sessions_.supported()) {
    co_return co_await ex.Respond(ErrorResponse(
        501, "Sessions are not supported by the '" + std::string(executor_.name()) + "' backend."));
  }
  if (path == "/v1/sessions") {
    if (method == "POST") co_return co_await CreateSession(ex);
    if (method == "GET") co_return co_await ListSessions(ex);
    co_return co_await ex.Respond(MethodNotAllowed("GET, POST"));
  }
  // /v1/sessions/{id}[/bash|/execute|/execute/stream|/files]
  std::string_view rest = std::string_view(path).substr(kPrefix.size());
  size_t slash = rest.find('/');
  const std::string id(rest.substr(0, slash));
  const std::string_view action = slash == std::string_view::npos ? "" : rest.substr(slash);
  struct Route {
    std::string_view action, method;
  };
  static const Route kRoutes[] = {{"", "DELETE"},       {"/bash", "POST"},
                                  {"/execute", "POST"}, {"/execute/stream", "POST"},
                                  {"/files", "GET"},    {"/files", "POST"}};
  std::string allowed;
  const Route* route = nullptr;
  for (const auto& r : kRoutes) {
    if (r.action != action) continue;
    if (r.method == method) route = &r;
    allowed += (allowed.empty() ? "" : ", ") + std::string(r.method);
  }
  if (allowed.empty()) co_return co_await ex.Respond(ErrorResponse(404, "Not Found"));
  if (route == nullptr) co_return co_await ex.Respond(MethodNotAllowed(allowed));
  if (!IsSessionId(id)) {
    co_return co_await ex.Respond(ApiErrorResponse(SessionManager::NotFound(id)));
  }
  if (action.empty()) co_return co_await DeleteSession(ex, id);
  if (action == "/bash") co_return co_await SessionBash(ex, id);
  if (action == "/execute") co_return co_await SessionExecute(ex, id, /*stream=*/false);
  if (action == "/execute/stream") co_return co_await SessionExecute(ex, id, /*stream=*/true);
  if (method == "GET") co_return co_await SessionFiles(ex, id);
  co_await SessionStageFiles(ex, id);
}

asio::awaitable<void> ApiHandlers::CreateSession(HttpExchange& ex) {
  std::optional<std::string> body = co_await ReadJsonBody(ex);
  if (!body) co_return;
  auto request = ParseSessionCreateRequest(*body);
  if (!request.ok()) co_return co_await ex.Respond(ErrorResponse(422, request.status().message()));
  auto files = service_.ResolveFiles(request->files, "");
  if (auto* e = std::get_if<ApiError>(&files)) co_return co_await ex.Respond(ApiErrorResponse(*e));

  const std::string operation = "session_create";
  if (auto full = sessions_.CapacityError()) {
    metrics_.Rejected(operation, 503, "capacity");
    co_return co_await ex.Respond(ApiErrorResponse(*full));
  }
  std::optional<Admission::Permit> permit = co_await Admit(ex, operation);
  if (!permit) co_return;
  auto t0 = std::chrono::steady_clock::now();
  metrics_.Started(operation);
  auto created = co_await sessions_.Create(std::move(std::get<std::vector<StagedFile>>(files)),
                                           request->ttl_seconds);
  bool ok = std::holds_alternative<SessionSummary>(created);
  metrics_.Finished(operation, ok ? "ok" : "error",
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (!ok) co_return co_await ex.Respond(ApiErrorResponse(std::get<ApiError>(created)));
  co_await ex.Respond(JsonResponse(201, SessionCreatedJson(std::get<SessionSummary>(created))));
}

asio::awaitable<void> ApiHandlers::ListSessions(HttpExchange& ex) {
  co_await ex.Respond(JsonResponse(200, SessionListJson(sessions_.List())));
}

asio::awaitable<void> ApiHandlers::DeleteSession(HttpExchange& ex, const std::string& id) {
  bool deleted = co_await sessions_.Delete(id);
  if (!deleted) co_return co_await ex.Respond(ApiErrorResponse(SessionManager::NotFound(id)));
  co_await ex.Respond(NoContent());
}

asio::awaitable<void> ApiHandlers::SessionBash(HttpExchange& ex, const std::string& id) {
  std::optional<std::string> body = co_await ReadJsonBody(ex);
  if (!body) co_return;
  auto request = ParseBashRequest(*body, config_.max_exec_timeout_ms);
  if (!request.ok()) co_return co_await ex.Respond(ErrorResponse(422, request.status().message()));
  const std::string operation = "session_bash";
  std::optional<Admission::Permit> permit = co_await Admit(ex, operation);
  if (!permit) co_return;
  auto t0 = std::chrono::steady_clock::now();
  metrics_.Started(operation);
  CappedOutput out(config_.max_output_bytes), err(config_.max_output_bytes);
  OutputSink sink = [&](StreamKind kind, std::string_view data) {
    (kind == StreamKind::kStdout ? out : err).Append(data);
  };
  // A client that leaves does not end the call: the session stays consistent, the call ends at
  // its timeout at the latest.
  auto outcome = co_await sessions_.Bash(
      id, std::move(request->cmd), std::chrono::milliseconds(request->timeout_ms), std::move(sink));
  std::string result = "error";
  if (auto* run = std::get_if<RunOutcome>(&outcome)) result = run->timed_out ? "timed_out" : "ok";
  metrics_.Finished(operation, result,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (auto* e = std::get_if<ApiError>(&outcome))
    co_return co_await ex.Respond(ApiErrorResponse(*e));
  co_await ex.Respond(
      JsonResponse(200, BashResultJson(std::get<RunOutcome>(outcome), out.Text(), err.Text())));
}

asio::awaitable<void> ApiHandlers::SessionExecute(HttpExchange& ex, const std::string& id,
                                                  bool stream) {
  std::optional<std::string> body = co_await ReadJsonBody(ex);
  if (!body) co_return;
  auto request = ParseExecuteRequest(*body, config_.max_exec_timeout_ms);
  if (!request.ok()) co_return co_await ex.Respond(ErrorResponse(422, request.status().message()));
  if (request->language != "python") {
    co_return co_await ex.Respond(ErrorResponse(
        422, "A session's persistent interpreter runs Python only; use POST /v1/sessions/" + id +
                 "/bash for shell commands."));
  }
  auto inputs = service_.ResolveFiles(request->files, "");
  if (auto* e = std::get_if<ApiError>(&inputs)) co_return co_await ex.Respond(ApiErrorResponse(*e));
  const std::string operation = stream ? "session_execute_stream" : "session_execute";
  std::optional<Admission::Permit> permit = co_await Admit(ex, operation);
  if (!permit) co_return;
  auto t0 = std::chrono::steady_clock::now();
  metrics_.Started(operation);
  SessionCall call;
  call.code = std::move(request->code);
  call.stdin_data = std::move(request->stdin_data);
  call.timeout = std::chrono::milliseconds(request->timeout_ms);
  call.last_line_interactive = request->last_line_interactive;
  call.inputs = std::move(std::get<std::vector<StagedFile>>(inputs));
  // The session outlives the client: no kill hook, the call ends at its timeout at the latest.
  Runner run = [this, &id, &call](OutputSink sink, const KillHook&) {
    return sessions_.Execute(id, std::move(call), std::move(sink));
  };
  std::string outcome;
  if (stream) {
    outcome = co_await ExecuteStream(ex, run);
  } else {
    outcome = co_await ExecuteBatch(ex, run);
  }
  Finish(operation, outcome, t0);
}

asio::awaitable<void> ApiHandlers::SessionFiles(HttpExchange& ex, const std::string& id) {
  auto files = co_await sessions_.Files(id);
  if (auto* e = std::get_if<ApiError>(&files)) co_return co_await ex.Respond(ApiErrorResponse(*e));
  co_await ex.Respond(
      JsonResponse(200, WorkspaceFilesJson(std::get<std::vector<WorkspaceFile>>(files))));
}

asio::awaitable<void> ApiHandlers::SessionStageFiles(HttpExchange& ex, const std::string& id) {
  std::optional<std::string> body = co_await ReadJsonBody(ex);
  if (!body) co_return;
  auto request = ParseStageFilesRequest(*body);
  if (!request.ok()) co_return co_await ex.Respond(ErrorResponse(422, request.status().message()));
  auto files = service_.ResolveFiles(*request, "");
  if (auto* e = std::get_if<ApiError>(&files)) co_return co_await ex.Respond(ApiErrorResponse(*e));
  auto staged = co_await sessions_.Stage(id, std::move(std::get<std::vector<StagedFile>>(files)));
  if (staged) co_return co_await ex.Respond(ApiErrorResponse(*staged));
  co_await ex.Respond(NoContent());
}

}  // namespace ci::daemon
