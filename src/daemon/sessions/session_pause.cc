// SessionManager's pause, resume, fork and snapshots (docs/sessions.md): freezing where the
// backend can, else the files and the Python state saved by the sandbox itself
// (sandbox_archive.h, python_state.h) into the store (session_snapshots.h) and brought back into
// a new sandbox of the same spec.
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "core/short_id.h"
#include "core/sleep.h"
#include "core/unix_time.h"
#include "daemon/sessions/python_session.h"
#include "daemon/sessions/python_state.h"
#include "daemon/sessions/sandbox_archive.h"
#include "daemon/sessions/session_manager.h"

namespace ci::daemon {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kStateTimeoutMs = 60000;  // dumping or loading the Python state

std::vector<std::string> RuleTexts(const std::vector<EgressRule>& rules) {
  std::vector<std::string> out;
  for (const auto& r : rules) out.push_back(r.ToString());
  return out;
}

std::optional<EgressPolicy> PolicyOf(const SnapshotRecord& r) {
  if (!r.egress) return std::nullopt;
  EgressPolicy p;
  for (const auto* list : {&r.egress_allow, &r.egress_deny}) {
    for (const std::string& text : *list) {
      auto rule = ParseEgressRule(text);
      if (rule.ok()) (list == &r.egress_allow ? p.allow : p.deny).push_back(*rule);
    }
  }
  return p;
}

// A call to the interpreter (python_state.h) and its one-line report.
asio::awaitable<Result<PythonStateReport>> StateCall(Sandbox& sandbox, std::string_view op) {
  RunPayload payload;
  payload.call = PythonStateRequest(op, kPythonStatePath, kStateTimeoutMs);
  payload.timeout = std::chrono::milliseconds(kStateTimeoutMs) + kSessionCallGrace;
  std::string out, err;
  OutputSink sink = [&](StreamKind kind, std::string_view chunk) {
    std::string& to = kind == StreamKind::kStdout ? out : err;
    if (to.size() < (1 << 20)) to.append(chunk);
  };
  auto run = co_await sandbox.Run(std::move(payload), sink);
  if (!run.ok()) co_return run.status();
  if (run->no_server) co_return Status::Error("the interpreter had stopped");
  auto report = ParsePythonStateReport(out);
  if (!report.ok()) {
    co_return Status::Error(report.status().message() + (err.empty() ? "" : ": " + err));
  }
  if (!report->error.empty()) co_return Status::Error(report->error);
  co_return report;
}

// At most kMaxLost entries of 300 bytes, the rest counted: a record stays small whatever a
// sandbox holds (the names and reasons come from it).
constexpr size_t kMaxLost = 100;
void CapLost(std::vector<std::string>& lost) {
  for (std::string& l : lost) {
    if (l.size() > 300) l = l.substr(0, 300) + "...";
  }
  if (lost.size() <= kMaxLost) return;
  const size_t more = lost.size() - kMaxLost;
  lost.resize(kMaxLost);
  lost.push_back("... and " + std::to_string(more) + " more");
}

ApiError NotPaused(const std::string& id) {
  return {409, "Session '" + id + "' is already paused"};
}

}  // namespace

asio::awaitable<std::variant<PauseOutcome, ApiError>> SessionManager::Pause(
    const std::string& id, const std::string& client, bool memory) {
  Acquired a = co_await Acquire(id, client, /*wake=*/false);
  if (!a.s) co_return std::move(a.error);
  SessionPtr s = std::move(a.s);
  if (s->state != Session::State::kRunning) {
    Release(s);
    co_return NotPaused(id);
  }
  PauseOutcome outcome;
  if (memory) {
    const auto t0 = std::chrono::steady_clock::now();
    Status frozen = co_await s->sandbox->Freeze(true);
    if (frozen.ok()) {
      MarkFrozen(*s);
      Release(s);
      spdlog::info("session {} frozen in {} ms", ShortId(id),
                   std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - t0)
                       .count());
      outcome.state = "frozen";
      co_return outcome;
    }
    if (!frozen.unavailable()) {
      Release(s);
      spdlog::error("freezing session {}: {}", ShortId(id), frozen.message());
      co_return ApiError{500, "Session '" + id + "' could not be frozen: " + frozen.message()};
    }
    outcome.why_not_frozen = frozen.message();
  }
  if (auto full = PausedCapacityError(s->summary.client)) {
    Release(s);
    co_return std::move(*full);
  }
  auto paused = co_await PauseToDisk(s);
  Release(s);
  if (auto* o = std::get_if<PauseOutcome>(&paused)) o->why_not_frozen = outcome.why_not_frozen;
  co_return paused;
}

void SessionManager::MarkFrozen(Session& s) {
  const double now = UnixNow();
  s.state = Session::State::kFrozen;
  s.running_left = s.summary.expires_at - now;
  s.summary.expires_at =
      std::min(s.hard_end, now + static_cast<double>(config_.session_pause_ttl_sec));
  s.expiry.cancel();  // ExpireAt waits for the pause's end
}

asio::awaitable<std::variant<PauseOutcome, ApiError>> SessionManager::PauseToDisk(
    const SessionPtr& s) {
  const auto t0 = std::chrono::steady_clock::now();
  auto saved = co_await SaveSnapshot(*s, "pause", s->id, "");
  if (auto* e = std::get_if<ApiError>(&saved)) co_return std::move(*e);
  const SnapshotRecord& record = std::get<SnapshotRecord>(saved);
  co_await StopEgress(*s);
  co_await s->sandbox->Destroy();
  s->sandbox.reset();
  s->state = Session::State::kPaused;
  s->running_left = record.running_left;
  s->hard_left = record.hard_left;
  s->summary.expires_at = record.expires_at;
  s->hard_end = record.expires_at;
  s->expiry.cancel();
  spdlog::info(
      "session {} paused to disk in {} ms ({} bytes, {} thing(s) not kept)", ShortId(s->id),
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count(),
      record.data_bytes, record.lost.size());
  co_return PauseOutcome{"paused", "", record.lost};
}

asio::awaitable<std::variant<SnapshotRecord, ApiError>> SessionManager::SaveSnapshot(
    Session& s, std::string kind, std::string id, std::string name) {
  const double now = UnixNow();
  SnapshotRecord record;
  record.id = std::move(id);
  record.kind = std::move(kind);
  record.client = s.summary.client;
  record.name = std::move(name);
  record.session = s.id;
  record.created_at = now;
  record.session_created_at = s.summary.created_at;
  record.running_left = std::max(1.0, s.summary.expires_at - now);
  record.hard_left = std::max(record.running_left, s.hard_end - now);
  record.expires_at = now + static_cast<double>(config_.session_pause_ttl_sec);
  if (record.kind == "pause") record.attachment = s.attachment;
  if (s.egress_policy) {
    record.egress = true;
    record.egress_allow = RuleTexts(s.egress_policy->allow);
    record.egress_deny = RuleTexts(s.egress_policy->deny);
  }
  if (s.interpreter_started) {
    auto dumped = co_await StateCall(*s.sandbox, "dump");
    if (dumped.ok()) {
      record.python = true;
      for (const auto& [global, why] : dumped->lost) {
        record.lost.push_back("python global '" + global + "': " + why);
      }
    } else if (dumped.status().gone()) {
      co_return ApiError{
          410, "Session '" + s.id + "': its sandbox stopped (" + dumped.status().message() + ")"};
    } else {
      record.lost.push_back("the Python state: " + dumped.status().message());
    }
  }
  auto writer = snapshots_.Begin(s.summary.client, config_.snapshot_max_mb << 20);
  if (!writer.ok()) {
    spdlog::error("snapshot of session {}: {}", ShortId(s.id), writer.status().message());
    co_return ApiError{500, "Internal Server Error"};
  }
  Status packed = co_await PackSandbox(*s.sandbox, **writer, &record.lost);
  CapLost(record.lost);
  if (record.python) {  // the state file is the snapshot's, not the session's
    RunPayload rm;
    rm.argv = {"rm", "-f", std::string(kPythonStatePath)};
    OutputSink none = [](StreamKind, std::string_view) {};
    (void)co_await s.sandbox->Run(std::move(rm), std::move(none));
  }
  if (!packed.ok()) {
    if ((*writer)->full() != FileStore::Full::kNo) {
      co_return ApiError{507, "Session '" + s.id + "' does not fit in the file store (" +
                                  packed.message() +
                                  "); delete files or snapshots of this API key and try again"};
    }
    if ((*writer)->over_max()) {
      co_return ApiError{413, "Session '" + s.id + "' is larger than SNAPSHOT_MAX_MB (" +
                                  std::to_string(config_.snapshot_max_mb) +
                                  " MiB) once packed; remove files from /workspace or /tmp"};
    }
    spdlog::error("snapshot of session {}: {}", ShortId(s.id), packed.message());
    co_return ApiError{500, "Session '" + s.id + "' could not be saved: " + packed.message()};
  }
  auto saved = snapshots_.Save(**writer, std::move(record));
  if (!saved.ok()) {
    spdlog::error("saving the snapshot of session {}: {}", ShortId(s.id), saved.status().message());
    co_return ApiError{507, "Session '" + s.id + "' could not be saved in the file store: " +
                                saved.status().message()};
  }
  co_return std::move(saved).value();
}

asio::awaitable<std::variant<std::vector<std::string>, ApiError>> SessionManager::Restore(
    Session& s, const SnapshotRecord& record) {
  auto data = snapshots_.OpenData(record);
  if (!data.ok()) {
    spdlog::error("snapshot {} of session {}: {}", record.id, ShortId(record.session),
                  data.status().message());
    co_return ApiError{500, "Snapshot '" + record.id + "' cannot be restored: " +
                                data.status().message() + "; it is kept as it is"};
  }
  Status unpacked = co_await UnpackSandbox(*s.sandbox, (*data)->path());
  if (!unpacked.ok()) {
    spdlog::error("restoring snapshot {}: {}", record.id, unpacked.message());
    co_return ApiError{500, "Snapshot '" + record.id + "' could not be restored (" +
                                unpacked.message() + "); it is kept as it is"};
  }
  std::vector<std::string> lost = record.lost;
  if (record.python) {
    auto started = co_await StartInterpreter(s);
    Result<PythonStateReport> loaded = started.status();
    if (started.ok()) loaded = co_await StateCall(*s.sandbox, "load");
    if (!loaded.ok()) {
      lost.push_back("the Python state: " + loaded.status().message());
    } else {
      for (const auto& [global, why] : loaded->lost) {
        lost.push_back("python global '" + global + "': " + why);
      }
    }
  }
  CapLost(lost);
  co_return lost;
}

asio::awaitable<std::optional<ApiError>> SessionManager::Wake(Session& s) {
  const double now = UnixNow();
  if (s.state == Session::State::kFrozen) {
    Status thawed = co_await s.sandbox->Freeze(false);
    if (!thawed.ok()) {
      spdlog::error("thawing session {}: {}", ShortId(s.id), thawed.message());
      co_return ApiError{500, "Session '" + s.id + "' could not be thawed: " + thawed.message()};
    }
    s.state = Session::State::kRunning;
    s.summary.expires_at = std::min(s.hard_end, now + s.running_left);
    s.expiry.cancel();
    co_return std::nullopt;
  }
  auto record = snapshots_.Find(s.id);
  if (!record)
    co_return ApiError{410, "Session '" + s.id + "' was paused and its snapshot is gone"};
  if (auto full = CapacityError(s.summary.client)) co_return full;  // it is not counted: paused
  s.summary.expires_at = now + record->running_left;
  s.hard_end = now + record->hard_left;
  std::vector<StagedFile> files;
  ++creating_;
  auto refused = co_await NewSandbox(s, files);
  --creating_;
  if (refused) co_return refused;
  // The egress CA is staged first: the snapshot's older one stays out (UnpackSandbox).
  std::variant<std::vector<std::string>, ApiError> restored = ApiError{500, "not restored"};
  Status staged;
  if (!files.empty()) staged = co_await StageFiles(s, files);
  if (staged.ok()) {
    restored = co_await Restore(s, *record);
  } else {
    restored = ApiError{500, "staging the egress CA: " + staged.message()};
  }
  if (auto* e = std::get_if<ApiError>(&restored)) {
    co_await StopEgress(s);
    co_await s.sandbox->Destroy();
    s.sandbox.reset();
    s.summary.expires_at = record->expires_at;
    s.hard_end = record->expires_at;
    co_return std::move(*e);
  }
  snapshots_.Remove(*record);
  s.state = Session::State::kRunning;
  s.expiry.cancel();
  s.wake_notice.clear();
  for (const std::string& l : std::get<std::vector<std::string>>(restored)) {
    s.wake_notice += "  " + l + "\n";
  }
  s.resumed_lost = std::get<std::vector<std::string>>(restored);
  spdlog::info("session {} resumed from its snapshot ({} thing(s) not restored)", ShortId(s.id),
               s.resumed_lost.size());
  co_return std::nullopt;
}

asio::awaitable<std::variant<ResumeOutcome, ApiError>> SessionManager::Resume(
    const std::string& id, const std::string& client) {
  Acquired a = co_await Acquire(id, client, /*wake=*/false);
  if (!a.s) co_return std::move(a.error);
  SessionPtr s = std::move(a.s);
  ResumeOutcome outcome;
  outcome.was_running = s->state == Session::State::kRunning;
  outcome.from_snapshot = s->state == Session::State::kPaused;
  std::optional<ApiError> refused;
  if (!outcome.was_running) refused = co_await Wake(*s);
  if (outcome.from_snapshot && !refused) {
    outcome.lost = std::move(s->resumed_lost);
    s->wake_notice.clear();  // said here
  }
  Release(s);
  if (refused) co_return std::move(*refused);
  co_return outcome;
}

SessionManager::SessionPtr SessionManager::Adopt(const SnapshotRecord& record) {
  if (record.expires_at <= UnixNow()) {
    snapshots_.Remove(record);
    return nullptr;
  }
  auto s = std::make_shared<Session>(ex_);
  s->id = record.id;
  s->summary = {record.id, record.session_created_at, record.expires_at, record.client};
  s->state = Session::State::kPaused;
  s->hard_end = record.expires_at;
  s->running_left = record.running_left;
  s->hard_left = record.hard_left;
  s->last_used = record.created_at;
  s->egress_policy = PolicyOf(record);
  s->attachment = record.attachment;
  sessions_[s->id] = s;
  asio::co_spawn(ex_, ExpireAt(s), asio::detached);
  spdlog::info("session {} found paused in the store; its next call resumes it", ShortId(s->id));
  return s;
}

asio::awaitable<std::variant<std::vector<std::variant<SessionSummary, ApiError>>, ApiError>>
SessionManager::Fork(const std::string& id, const std::string& client, uint32_t count,
                     int64_t ttl_seconds) {
  Acquired a = co_await Acquire(id, client);
  if (!a.s) co_return std::move(a.error);
  SessionPtr s = std::move(a.s);
  auto snap_id = NewSnapshotId();
  if (!snap_id.ok()) {
    Release(s);
    co_return ApiError{500, "Internal Server Error"};
  }
  auto saved = co_await SaveSnapshot(*s, "fork", *snap_id, "");
  const int64_t left = static_cast<int64_t>(s->summary.expires_at - UnixNow());
  Release(s);
  if (auto* e = std::get_if<ApiError>(&saved)) co_return std::move(*e);
  const SnapshotRecord& record = std::get<SnapshotRecord>(saved);
  std::vector<std::variant<SessionSummary, ApiError>> forks;
  const int64_t ttl = ttl_seconds > 0 ? ttl_seconds : std::max<int64_t>(left, 1);
  for (uint32_t i = 0; i < count; ++i) {
    std::vector<StagedFile> none;
    auto fork = co_await Create(std::move(none), ttl, client, s->egress_policy, record);
    forks.push_back(std::move(fork));
  }
  snapshots_.Remove(record);
  spdlog::info("session {} forked {} way(s)", ShortId(id), count);
  co_return forks;
}

asio::awaitable<std::variant<SnapshotRecord, ApiError>> SessionManager::TakeSnapshot(
    const std::string& id, const std::string& client, std::string name) {
  Acquired a = co_await Acquire(id, client);
  if (!a.s) co_return std::move(a.error);
  SessionPtr s = std::move(a.s);
  auto snap_id = NewSnapshotId();
  std::variant<SnapshotRecord, ApiError> saved = ApiError{500, "Internal Server Error"};
  if (snap_id.ok()) saved = co_await SaveSnapshot(*s, "named", *snap_id, std::move(name));
  Release(s);
  if (auto* r = std::get_if<SnapshotRecord>(&saved)) {
    spdlog::info("session {} snapshot {} taken ({} bytes)", ShortId(id), r->id, r->data_bytes);
  }
  co_return saved;
}

std::variant<SnapshotRecord, ApiError> SessionManager::SnapshotFor(
    const std::string& id_or_name, const std::string& client) const {
  for (SnapshotRecord& r : snapshots_.List("named")) {
    if (r.client == client && (r.id == id_or_name || (!r.name.empty() && r.name == id_or_name))) {
      return std::move(r);
    }
  }
  return ApiError{404, "Snapshot '" + id_or_name + "' not found"};
}

std::vector<SnapshotRecord> SessionManager::Snapshots(const std::string& client) const {
  std::vector<SnapshotRecord> out = snapshots_.List("named");
  std::erase_if(out, [&](const SnapshotRecord& r) { return r.client != client; });
  return out;
}

bool SessionManager::DeleteSnapshot(const std::string& id_or_name, const std::string& client) {
  auto found = SnapshotFor(id_or_name, client);
  if (auto* r = std::get_if<SnapshotRecord>(&found)) {
    snapshots_.Remove(*r);
    return true;
  }
  return false;
}

std::shared_ptr<void> SessionManager::KeepBusy(const std::string& id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  SessionPtr s = it->second;
  ++s->in_use;
  return std::shared_ptr<void>(nullptr, [s](void*) {
    --s->in_use;
    s->last_used = UnixNow();
  });
}

bool SessionManager::Attach(const std::string& id, const std::string& client,
                            std::string attachment) {
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->summary.client != client) return false;
  it->second->attachment = std::move(attachment);
  return true;
}

asio::awaitable<std::optional<SessionManager::Attached>> SessionManager::AttachmentOf(
    const std::string& id) {
  if (!sessions_.contains(id)) {
    auto record = snapshots_.Find(id);  // paused before a restart, or by another replica
    if (!record || record->kind != "pause") co_return std::nullopt;
    (void)co_await Find(id, record->client);
  }
  auto it = sessions_.find(id);
  if (it == sessions_.end()) co_return std::nullopt;
  const Session& s = *it->second;
  co_return Attached{s.summary.client, s.attachment, s.Summary()};
}

void SessionManager::StartSweeps() { asio::co_spawn(ex_, SweepIdle(), asio::detached); }

asio::awaitable<void> SessionManager::SweepIdle() {
  const double freeze_after = static_cast<double>(config_.session_idle_pause_sec);
  const double snapshot_after = static_cast<double>(config_.session_idle_snapshot_sec);
  double shortest = 60;
  for (double t : {freeze_after, snapshot_after}) {
    if (t > 0) shortest = std::min(shortest, t);
  }
  const auto period =
      std::chrono::milliseconds(static_cast<int64_t>(std::clamp(shortest / 4, 0.25, 15.0) * 1000));
  double swept_at = 0;
  while (!ending_all_) {
    co_await Sleep(period);
    const double now = UnixNow();
    std::vector<SessionPtr> idle;
    for (auto& [id, s] : sessions_) {
      if (!s->busy && s->in_use == 0 && s->state != Session::State::kPaused) idle.push_back(s);
    }
    for (SessionPtr& s : idle) {
      const double quiet = now - s->last_used;
      const bool to_disk = snapshot_after > 0 && quiet >= snapshot_after;
      const bool to_freeze =
          freeze_after > 0 && quiet >= freeze_after && s->state == Session::State::kRunning;
      if (s->busy || s->ended || ending_all_ || (!to_disk && !to_freeze)) continue;
      s->busy = true;
      std::optional<ApiError> woke;
      if (to_disk && s->state == Session::State::kFrozen) woke = co_await Wake(*s);
      if (to_disk && !woke) {
        auto paused = co_await PauseToDisk(s);
        if (auto* e = std::get_if<ApiError>(&paused)) {
          spdlog::warn("idle session {} was not paused: {}", ShortId(s->id), e->detail);
        }
      } else if (to_freeze) {
        Status frozen = co_await s->sandbox->Freeze(true);
        if (frozen.ok()) {
          MarkFrozen(*s);
          spdlog::info("idle session {} frozen", ShortId(s->id));
        }
      }
      s->busy = false;  // not Release: it stays idle
      s->idle.Notify();
    }
    // Paused sessions past their end that no replica holds any more, once a minute.
    if (now - swept_at >= 60) {
      swept_at = now;
      for (const SnapshotRecord& r : snapshots_.List("pause")) {
        if (r.expires_at < now && !sessions_.contains(r.id)) snapshots_.Remove(r);
      }
    }
  }
}

}  // namespace ci::daemon
