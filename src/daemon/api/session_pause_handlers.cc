// Pause, resume, fork and named snapshots of sessions (docs/api.md "Pause, resume, fork and
// snapshots"), on top of SessionManager.
#include "core/rfc3339.h"
#include "daemon/api/handlers.h"
#include "daemon/api/request_parsing.h"
#include "daemon/api/responses.h"
#include "daemon/front/request_steps.h"

namespace ci::daemon {
namespace {

void WriteList(JsonWriter& w, const char* key, const std::vector<std::string>& items) {
  w.Key(key);
  w.StartArray();
  for (const auto& i : items) WriteString(w, SanitizeUtf8(i));
  w.EndArray();
}

void WriteSnapshot(JsonWriter& w, const SnapshotRecord& r) {
  w.StartObject();
  WriteField(w, "snapshot_id", r.id);
  WriteField(w, "name", r.name);
  WriteField(w, "session_id", r.session);
  w.Key("created_at");
  w.Double(r.created_at);
  w.Key("size_bytes");
  w.Uint64(r.data_bytes);
  WriteList(w, "not_kept", r.lost);
  w.EndObject();
}

}  // namespace

asio::awaitable<void> ApiHandlers::PauseSession(HttpExchange& ex, const std::string& id) {
  std::optional<std::string> body = co_await ReadJsonBody(ex, config_.max_request_body_mb);
  if (!body) co_return;
  auto memory = ParsePauseRequest(*body);
  if (!memory.ok()) co_return co_await ex.Respond(ErrorResponse(422, memory.status().message()));
  auto paused = co_await sessions_.Pause(id, ex.client, *memory);
  if (auto* e = std::get_if<ApiError>(&paused)) co_return co_await ex.Respond(ApiErrorResponse(*e));
  const PauseOutcome& p = std::get<PauseOutcome>(paused);
  co_await ex.Respond(JsonResponse(200, JsonText([&](JsonWriter& w) {
                                     w.StartObject();
                                     WriteField(w, "session_id", id);
                                     WriteField(w, "state", p.state);
                                     w.Key("memory_kept");
                                     w.Bool(p.state == "frozen");
                                     if (!p.why_not_frozen.empty()) {
                                       WriteField(w, "not_frozen_because", p.why_not_frozen);
                                     }
                                     WriteList(w, "not_kept", p.lost);
                                     w.EndObject();
                                   })));
}

asio::awaitable<void> ApiHandlers::ResumeSession(HttpExchange& ex, const std::string& id) {
  std::optional<std::string> body = co_await ReadJsonBody(ex, config_.max_request_body_mb);
  if (!body) co_return;
  if (Status s = ParseIgnoredBody(*body); !s.ok()) {
    co_return co_await ex.Respond(ErrorResponse(422, s.message()));
  }
  auto resumed = co_await sessions_.Resume(id, ex.client);
  if (auto* e = std::get_if<ApiError>(&resumed)) {
    co_return co_await ex.Respond(ApiErrorResponse(*e));
  }
  const ResumeOutcome& r = std::get<ResumeOutcome>(resumed);
  const char* from = r.was_running ? "running" : r.from_snapshot ? "snapshot" : "memory";
  co_await ex.Respond(JsonResponse(200, JsonText([&](JsonWriter& w) {
                                     w.StartObject();
                                     WriteField(w, "session_id", id);
                                     WriteField(w, "state", "running");
                                     WriteField(w, "resumed_from", from);
                                     WriteList(w, "not_restored", r.lost);
                                     w.EndObject();
                                   })));
}

asio::awaitable<void> ApiHandlers::ForkSession(HttpExchange& ex, const std::string& id) {
  std::optional<std::string> body = co_await ReadJsonBody(ex, config_.max_request_body_mb);
  if (!body) co_return;
  auto request = ParseForkRequest(*body);
  if (!request.ok()) co_return co_await ex.Respond(ErrorResponse(422, request.status().message()));
  auto forks = co_await sessions_.Fork(id, ex.client, request->count, request->ttl_seconds);
  if (auto* e = std::get_if<ApiError>(&forks)) co_return co_await ex.Respond(ApiErrorResponse(*e));
  const auto& list = std::get<0>(forks);
  co_await ex.Respond(JsonResponse(201, JsonText([&](JsonWriter& w) {
                                     w.StartObject();
                                     w.Key("forks");
                                     w.StartArray();
                                     for (const auto& f : list) {
                                       w.StartObject();
                                       if (const auto* s = std::get_if<SessionSummary>(&f)) {
                                         WriteField(w, "session_id", s->id);
                                         w.Key("expires_at");
                                         w.Double(s->expires_at);
                                       } else {
                                         const auto& e = std::get<ApiError>(f);
                                         w.Key("error");
                                         w.StartObject();
                                         w.Key("status");
                                         w.Int(e.status);
                                         WriteField(w, "detail", e.detail);
                                         w.EndObject();
                                       }
                                       w.EndObject();
                                     }
                                     w.EndArray();
                                     w.EndObject();
                                   })));
}

asio::awaitable<void> ApiHandlers::SnapshotSession(HttpExchange& ex, const std::string& id) {
  std::optional<std::string> body = co_await ReadJsonBody(ex, config_.max_request_body_mb);
  if (!body) co_return;
  auto name = ParseSnapshotRequest(*body);
  if (!name.ok()) co_return co_await ex.Respond(ErrorResponse(422, name.status().message()));
  auto taken = co_await sessions_.TakeSnapshot(id, ex.client, std::move(name).value());
  if (auto* e = std::get_if<ApiError>(&taken)) co_return co_await ex.Respond(ApiErrorResponse(*e));
  const SnapshotRecord& r = std::get<SnapshotRecord>(taken);
  co_await ex.Respond(JsonResponse(201, JsonText([&](JsonWriter& w) { WriteSnapshot(w, r); })));
}

asio::awaitable<void> ApiHandlers::ListSnapshots(HttpExchange& ex, const std::string&) {
  const std::vector<SnapshotRecord> list = sessions_.Snapshots(ex.client);
  co_await ex.Respond(JsonResponse(200, JsonText([&](JsonWriter& w) {
                                     w.StartObject();
                                     w.Key("snapshots");
                                     w.StartArray();
                                     for (const auto& r : list) WriteSnapshot(w, r);
                                     w.EndArray();
                                     w.EndObject();
                                   })));
}

asio::awaitable<void> ApiHandlers::DeleteSnapshot(HttpExchange& ex, const std::string& id) {
  if (!sessions_.DeleteSnapshot(id, ex.client)) {
    co_return co_await ex.Respond(ErrorResponse(404, "Snapshot '" + id + "' not found"));
  }
  co_await ex.Respond(NoContent());
}

}  // namespace ci::daemon
