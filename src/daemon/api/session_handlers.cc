// The /v1/sessions endpoints of docs/api.md ("Sessions"), on top of SessionManager.
#include <spdlog/spdlog.h>

#include "daemon/api/handlers.h"
#include "daemon/api/request_parsing.h"
#include "daemon/api/responses.h"
#include "daemon/front/request_steps.h"
#include "daemon/service/output_buffer.h"
#include "daemon/service/sandbox_egress.h"
#include "daemon/service/verdict.h"

namespace ci::daemon {

asio::awaitable<void> ApiHandlers::CreateSession(HttpExchange& ex, const std::string&) {
  std::optional<std::string> body = co_await ReadJsonBody(ex, config_.max_request_body_mb);
  if (!body) co_return;
  auto request = ParseSessionCreateRequest(*body);
  if (!request.ok()) co_return co_await ex.Respond(ErrorResponse(422, request.status().message()));
  auto files = service_.ResolveFiles(request->files, "", ex.client);
  if (auto* e = std::get_if<ApiError>(&files)) co_return co_await ex.Respond(ApiErrorResponse(*e));
  std::optional<SnapshotRecord> from;
  if (request->snapshot) {
    auto found = sessions_.SnapshotFor(*request->snapshot, ex.client);
    if (auto* e = std::get_if<ApiError>(&found)) {
      co_return co_await ex.Respond(ApiErrorResponse(*e));
    }
    from = std::get<SnapshotRecord>(std::move(found));
  }
  auto bounds = service_.EgressBoundsOf(ex.client);
  if (!bounds.ok()) co_return co_await ex.Respond(ErrorResponse(403, bounds.status().message()));
  auto egress = EgressFor(request->network, bounds->fallback, bounds->max);
  if (!egress.ok()) co_return co_await ex.Respond(ErrorResponse(422, egress.status().message()));
  std::optional<EgressPolicy> network;
  if (!egress->none()) network = std::move(egress).value();

  const Operation op = Operation::kSessionCreate;
  if (auto full = sessions_.CapacityError(ex.client)) {
    metrics_.Rejected(op, Rejection::kNoCapacity);
    co_return co_await ex.Respond(ApiErrorResponse(*full));
  }
  std::optional<Admission::Permit> permit = co_await Admit(ex, op);
  if (!permit) co_return;
  auto t0 = std::chrono::steady_clock::now();
  metrics_.Started(op);
  auto created = co_await sessions_.Create(std::move(std::get<std::vector<StagedFile>>(files)),
                                           request->ttl_seconds, ex.client, std::move(network),
                                           std::move(from));
  bool ok = std::holds_alternative<SessionSummary>(created);
  Finish(op, ok ? Outcome::kOk : Outcome::kError, t0);
  if (!ok) co_return co_await ex.Respond(ApiErrorResponse(std::get<ApiError>(created)));
  co_await ex.Respond(JsonResponse(201, SessionCreatedJson(std::get<SessionSummary>(created))));
}

asio::awaitable<void> ApiHandlers::ListSessions(HttpExchange& ex, const std::string&) {
  auto sessions = co_await sessions_.List(ex.client);
  co_await ex.Respond(JsonResponse(200, SessionListJson(sessions)));
}

asio::awaitable<void> ApiHandlers::DeleteSession(HttpExchange& ex, const std::string& id) {
  bool deleted = co_await sessions_.Delete(id, ex.client);
  if (!deleted) co_return co_await ex.Respond(ApiErrorResponse(SessionManager::NotFound(id)));
  co_await ex.Respond(NoContent());
}

asio::awaitable<void> ApiHandlers::SessionBash(HttpExchange& ex, const std::string& id) {
  std::optional<std::string> body = co_await ReadJsonBody(ex, config_.max_request_body_mb);
  if (!body) co_return;
  auto request = ParseBashRequest(*body, config_.max_exec_timeout_ms);
  if (!request.ok()) co_return co_await ex.Respond(ErrorResponse(422, request.status().message()));
  const Operation op = Operation::kSessionBash;
  std::optional<Admission::Permit> permit = co_await Admit(ex, op);
  if (!permit) co_return;
  auto t0 = std::chrono::steady_clock::now();
  metrics_.Started(op);
  CappedOutput out(config_.max_output_bytes), err(config_.max_output_bytes);
  OutputSink sink = [&](StreamKind kind, std::string_view data) {
    (kind == StreamKind::kStdout ? out : err).Append(data);
  };
  // A client that leaves does not end the call: the session stays consistent, the call ends at
  // its timeout at the latest.
  auto outcome =
      co_await sessions_.Bash(id, ex.client, std::move(request->cmd),
                              std::chrono::milliseconds(request->timeout_ms), std::move(sink));
  Outcome result = Outcome::kError;
  if (auto* run = std::get_if<RunOutcome>(&outcome)) {
    result = run->timed_out ? Outcome::kTimedOut : Outcome::kOk;
  }
  Finish(op, result, t0);
  if (auto* e = std::get_if<ApiError>(&outcome))
    co_return co_await ex.Respond(ApiErrorResponse(*e));
  co_await ex.Respond(
      JsonResponse(200, BashResultJson(std::get<RunOutcome>(outcome), out.Text(), err.Text())));
}

asio::awaitable<void> ApiHandlers::SessionExecuteBatch(HttpExchange& ex, const std::string& id) {
  co_await SessionExecute(ex, id, /*stream=*/false);
}

asio::awaitable<void> ApiHandlers::SessionExecuteStream(HttpExchange& ex, const std::string& id) {
  co_await SessionExecute(ex, id, /*stream=*/true);
}

asio::awaitable<void> ApiHandlers::SessionExecute(HttpExchange& ex, const std::string& id,
                                                  bool stream) {
  std::optional<std::string> body = co_await ReadJsonBody(ex, config_.max_request_body_mb);
  if (!body) co_return;
  auto request = ParseExecuteRequest(*body, config_.max_exec_timeout_ms);
  if (!request.ok()) co_return co_await ex.Respond(ErrorResponse(422, request.status().message()));
  if (request->language != "python") {
    co_return co_await ex.Respond(ErrorResponse(
        422, "A session's persistent interpreter runs Python only; use POST /v1/sessions/" + id +
                 "/bash for shell commands."));
  }
  auto inputs = service_.ResolveFiles(request->files, "", ex.client);
  if (auto* e = std::get_if<ApiError>(&inputs)) co_return co_await ex.Respond(ApiErrorResponse(*e));
  if (stream && !co_await sessions_.Exists(id, ex.client)) {
    co_return co_await ex.Respond(ApiErrorResponse(SessionManager::NotFound(id)));
  }
  const Operation op = stream ? Operation::kSessionExecuteStream : Operation::kSessionExecute;
  std::optional<Admission::Permit> permit = co_await Admit(ex, op);
  if (!permit) co_return;
  auto t0 = std::chrono::steady_clock::now();
  metrics_.Started(op);
  SessionCall call;
  call.code = std::move(request->code);
  call.stdin_data = std::move(request->stdin_data);
  call.timeout = std::chrono::milliseconds(request->timeout_ms);
  call.last_line_interactive = request->last_line_interactive;
  call.inputs = std::move(std::get<std::vector<StagedFile>>(inputs));
  // The session outlives the client: no kill hook, the call ends at its timeout at the latest.
  Runner run = [this, &id, &ex, &call](OutputSink sink, const KillHook&) {
    return sessions_.Execute(id, ex.client, std::move(call), std::move(sink));
  };
  Outcome outcome = co_await ExecuteEither(ex, stream, run);
  Finish(op, outcome, t0);
}

asio::awaitable<void> ApiHandlers::SessionFiles(HttpExchange& ex, const std::string& id) {
  auto files = co_await sessions_.Files(id, ex.client);
  if (auto* e = std::get_if<ApiError>(&files)) co_return co_await ex.Respond(ApiErrorResponse(*e));
  co_await ex.Respond(
      JsonResponse(200, WorkspaceFilesJson(std::get<std::vector<WorkspaceFile>>(files))));
}

asio::awaitable<void> ApiHandlers::SessionStageFiles(HttpExchange& ex, const std::string& id) {
  std::optional<std::string> body = co_await ReadJsonBody(ex, config_.max_request_body_mb);
  if (!body) co_return;
  auto request = ParseStageFilesRequest(*body);
  if (!request.ok()) co_return co_await ex.Respond(ErrorResponse(422, request.status().message()));
  auto files = service_.ResolveFiles(*request, "", ex.client);
  if (auto* e = std::get_if<ApiError>(&files)) co_return co_await ex.Respond(ApiErrorResponse(*e));
  auto staged =
      co_await sessions_.Stage(id, ex.client, std::move(std::get<std::vector<StagedFile>>(files)));
  if (staged) co_return co_await ex.Respond(ApiErrorResponse(*staged));
  co_await ex.Respond(NoContent());
}

}  // namespace ci::daemon
