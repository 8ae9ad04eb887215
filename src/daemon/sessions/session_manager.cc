#include "daemon/sessions/session_manager.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstring>
#include <ctime>

#include "core/random.h"
#include "core/short_id.h"
#include "core/sleep.h"
#include "core/unix_time.h"
#include "daemon/files/workspace_paths.h"
#include "daemon/service/output_buffer.h"
#include "daemon/service/result_bundles.h"
#include "daemon/sessions/python_session.h"

namespace ci::daemon {
namespace {

// What execve would refuse (E2BIG), refused on every backend before the sandbox is asked: one
// argument or environment entry over MAX_ARG_STRLEN, or all of them over 1 MiB.
std::optional<std::string> OverKernelLimits(const ProcessSpec& spec) {
  constexpr size_t kMaxString = 128 << 10, kMaxTotal = 1 << 20;
  size_t total = spec.cwd.size();
  for (const auto* list : {&spec.argv, &spec.env}) {
    for (const std::string& s : *list) {
      if (s.size() >= kMaxString) {
        return "an argument or environment entry is longer than 128 KiB (the kernel's limit)";
      }
      total += s.size() + 1;
    }
  }
  if (total > kMaxTotal) return std::string("the arguments and environment exceed 1 MiB");
  if (spec.cwd.size() >= 4096) return std::string("the cwd is longer than 4 KiB (PATH_MAX)");
  return std::nullopt;
}

using namespace std::chrono_literals;

// A session's process, holding the session in use while someone holds it (KeepBusy).
class WatchedProcess final : public SandboxProcess {
 public:
  WatchedProcess(std::unique_ptr<SandboxProcess> p, std::shared_ptr<void> in_use)
      : p_(std::move(p)), in_use_(std::move(in_use)) {}
  uint32_t pid() const override { return p_->pid(); }
  asio::awaitable<ProcessEnd> Wait(ProcessOutputSink sink) override {
    return p_->Wait(std::move(sink));
  }
  asio::awaitable<Status> WriteStdin(std::string data) override {
    return p_->WriteStdin(std::move(data));
  }
  void CloseStdin() override { p_->CloseStdin(); }

 private:
  std::unique_ptr<SandboxProcess> p_;
  std::shared_ptr<void> in_use_;
};

// The first call after a resume from a snapshot says what did not come back.
void TellWoken(std::string& notice, const OutputSink& sink) {
  if (notice.empty()) return;
  sink(StreamKind::kStderr,
       "[code-interpreter] This session was resumed from a snapshot; not restored:\n" + notice);
  notice.clear();
}

constexpr std::string_view kIdPrefix = "code-session-";
ApiError Internal() { return {500, "Internal Server Error"}; }  // the log says why

Result<std::string> NewSessionId() {
  std::string hex = RandomHex(16);
  if (hex.empty()) return Status::Errno("getrandom", errno);
  return std::string(kIdPrefix) + hex;
}

// FNV-1a of a file's bytes: tells a changed workspace file from an unchanged one (not a security
// boundary: the workspace is the user's own).
std::optional<uint64_t> HashFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  uint64_t h = 1469598103934665603ull;
  static thread_local char buf[1 << 16];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(buf[i])) * 1099511628211ull;
  }
  close(fd);
  if (n < 0) return std::nullopt;
  return h;
}

}  // namespace

SessionManager::SessionManager(asio::any_io_executor ex, const Config& config, Executor& executor,
                               FileStore& store, const SandboxSpec& spec,
                               const EgressShared& egress,
                               std::function<uint32_t(const std::string&)> share_of)
    : ex_(std::move(ex)),
      config_(config),
      egress_shared_(egress),
      share_of_(std::move(share_of)),
      executor_(executor),
      store_(store),
      spec_(spec),
      snapshots_(store) {}

ApiError SessionManager::NotFound(const std::string& id) {
  return {404, "Session '" + id + "' not found"};
}

ApiError SessionManager::EndedDuringCall(const Session& s) const {
  return {410, "Session '" + s.id + "' ended during this call (deleted, or its TTL ran out)"};
}

asio::awaitable<ApiError> SessionManager::EndGone(SessionPtr s, const Status& why) {
  spdlog::warn("session {} ended: its sandbox stopped: {}", ShortId(s->id), why.message());
  co_await End(s);
  co_return ApiError{410, "Session '" + s->id + "' ended: its sandbox stopped unexpectedly (" +
                              why.message() + "); create a new session"};
}

size_t SessionManager::Live() const {
  size_t n = 0;
  for (const auto& [id, s] : sessions_) n += s->state != Session::State::kPaused ? 1 : 0;
  return n;
}

std::optional<ApiError> SessionManager::CapacityError(const std::string& client) const {
  if (Live() + creating_ >= config_.max_sessions) {
    return ApiError{
        503, "Executor capacity unavailable (sessions): " + std::to_string(config_.max_sessions) +
                 " sessions are live on this replica (MAX_SESSIONS); delete one or wait "
                 "for one to expire."};
  }
  if (client.empty() || !share_of_) return std::nullopt;  // no API keys: the replica's limit
  const size_t share = share_of_(client);
  auto creating = creating_by_client_.find(client);
  size_t held = creating == creating_by_client_.end() ? 0 : creating->second;
  for (const auto& [id, s] : sessions_) {
    held += s->summary.client == client && s->state != Session::State::kPaused ? 1 : 0;
  }
  if (held < share) return std::nullopt;
  return ApiError{429, "API key '" + client + "' holds " + std::to_string(held) +
                           " sessions, its share of this replica (" + std::to_string(share) +
                           ": sessions= on its line in API_KEYS_FILE, else "
                           "MAX_SESSIONS_PER_KEY); delete one or wait for one to expire."};
}

std::optional<ApiError> SessionManager::PausedCapacityError(const std::string& client) const {
  size_t paused = 0, mine = 0;
  for (const auto& [id, s] : sessions_) {
    if (s->state != Session::State::kPaused) continue;
    ++paused;
    mine += s->summary.client == client ? 1 : 0;
  }
  if (paused >= kPausedPerLive * config_.max_sessions) {
    return ApiError{503, "Executor capacity unavailable (sessions): " + std::to_string(paused) +
                             " paused sessions on this replica (" + std::to_string(kPausedPerLive) +
                             " times MAX_SESSIONS); delete or resume one."};
  }
  if (client.empty() || !share_of_) return std::nullopt;
  const size_t bound = kPausedPerLive * share_of_(client);
  if (mine < bound) return std::nullopt;
  return ApiError{429, "API key '" + client + "' holds " + std::to_string(mine) +
                           " paused sessions (" + std::to_string(kPausedPerLive) +
                           " times its share of live ones); delete or resume one."};
}

asio::awaitable<std::variant<SessionSummary, ApiError>> SessionManager::Create(
    std::vector<StagedFile> files, int64_t ttl_seconds, const std::string& client,
    std::optional<EgressPolicy> egress, std::optional<SnapshotRecord> from) {
  if (auto full = CapacityError(client)) co_return *full;
  ++creating_;
  ++creating_by_client_[client];
  auto created =
      co_await CreateSandbox(std::move(files), ttl_seconds, client, std::move(egress), from);
  --creating_;
  if (--creating_by_client_[client] == 0) creating_by_client_.erase(client);
  // Created while DestroyAll ran (shutdown): nothing would end it, its sandbox would outlive us.
  if (ending_all_ && std::holds_alternative<SessionSummary>(created)) {
    co_await Delete(std::get<SessionSummary>(created).id, client);
    co_return ApiError{503, "The daemon is shutting down; create the session again"};
  }
  co_return created;
}

asio::awaitable<std::variant<SessionSummary, ApiError>> SessionManager::CreateSandbox(
    std::vector<StagedFile> files, int64_t ttl_seconds, const std::string& client,
    std::optional<EgressPolicy> egress, const std::optional<SnapshotRecord>& from) {
  auto id = NewSessionId();
  if (!id.ok()) {
    spdlog::error("session id: {}", id.status().message());
    co_return Internal();
  }
  auto s = std::make_shared<Session>(ex_);
  s->id = *id;
  s->summary.id = *id;
  s->summary.client = client;
  s->summary.created_at = UnixNow();
  s->summary.expires_at = s->summary.created_at + static_cast<double>(ttl_seconds);
  s->hard_end = s->summary.expires_at;
  s->last_used = s->summary.created_at;
  s->egress_policy = std::move(egress);
  if (auto refused = co_await NewSandbox(*s, files)) co_return std::move(*refused);
  if (!files.empty()) {
    Status staged = co_await StageFiles(*s, files);
    if (!staged.ok()) {
      spdlog::error("staging files into session {}: {}", ShortId(s->id), staged.message());
      co_await StopEgress(*s);
      co_await s->sandbox->Destroy();
      co_return Internal();
    }
  }
  if (from) {  // after the staged files, which win over the snapshot's
    auto restored = co_await Restore(*s, *from);
    if (auto* e = std::get_if<ApiError>(&restored)) {
      co_await StopEgress(*s);
      co_await s->sandbox->Destroy();
      co_return std::move(*e);
    }
    for (const std::string& l : std::get<std::vector<std::string>>(restored)) {
      s->wake_notice += "  " + l + "\n";
    }
  }
  sessions_[s->id] = s;
  asio::co_spawn(ex_, ExpireAt(s), asio::detached);
  spdlog::info("session {} created (ttl {} s, {} file(s){})", ShortId(s->id), ttl_seconds,
               files.size(), from ? ", from snapshot " + from->id : "");
  co_return s->Summary();
}

asio::awaitable<std::optional<ApiError>> SessionManager::NewSandbox(
    Session& s, std::vector<StagedFile>& files) {
  SandboxSpec spec = spec_;
  spec.session_expires_at = static_cast<int64_t>(s.hard_end) + 1;
  spec.session = {s.id, s.summary.created_at, s.hard_end, s.summary.client};
  if (s.egress_policy) AddEgressTo(egress_shared_, &spec, &files);
  auto prepared = co_await executor_.Prepare(spec);
  if (!prepared.ok()) co_return PrepareFailure(prepared.status());
  s.sandbox = std::move(prepared).value();
  s.interpreter_started = false;
  s.known.clear();
  if (s.egress_policy) {
    auto started = co_await StartEgress(*s.sandbox, *s.egress_policy, egress_shared_);
    if (!started.ok()) {
      spdlog::error("egress for session {}: {}", ShortId(s.id), started.status().message());
      co_await s.sandbox->Destroy();
      co_return ApiError{
          503, "The session's network could not be set up: " + started.status().message()};
    }
    s.egress = std::move(started).value();
  }
  co_return std::nullopt;
}

asio::awaitable<SessionManager::SessionPtr> SessionManager::Find(const std::string& id,
                                                                 const std::string& client) {
  while (finding_.contains(id)) co_await Sleep(5ms);  // one request looks, the others see it
  if (auto it = sessions_.find(id); it != sessions_.end()) {
    SessionPtr s = it->second;
    // Paused here and resumed through another replica since (its snapshot is gone): not ours.
    if (s->state != Session::State::kPaused || s->busy || snapshots_.Find(id)) {
      co_return s->summary.client == client ? s : nullptr;
    }
    s->ended = true;
    s->expiry.cancel();
    sessions_.erase(it);
  }
  // Ended here: its sandbox may still be on its way out.
  if (ended_.contains(id)) co_return nullptr;
  // Paused (by another replica, or by this daemon before it restarted): the pause record wins
  // over a sandbox the backend still lists, as in List (a pause writes the record before its
  // sandbox goes, whose deletion may not have begun yet).
  if (auto record = snapshots_.Find(id); record && record->kind == "pause") {
    SessionPtr s = Adopt(*record);
    co_return s && s->summary.client == client ? s : nullptr;
  }
  finding_.insert(id);
  auto found = co_await executor_.FindSession(spec_, id);
  finding_.erase(id);
  if (!found.ok()) {
    spdlog::warn("looking for session {} in the backend: {}", ShortId(id),
                 found.status().message());
    co_return nullptr;
  }
  if (sessions_.contains(id) || !*found) co_return nullptr;
  const SessionIdentity& identity = (*found)->identity;
  auto s = std::make_shared<Session>(ex_);
  s->id = id;
  s->summary = {id, identity.created_at, identity.expires_at, identity.client};
  s->hard_end = identity.expires_at;
  s->last_used = UnixNow();
  s->sandbox = std::move((*found)->sandbox);
  // Its interpreter, if it has one, is attached to by the first Python call (the relay finds
  // it); the files it knows are those of its first listing.
  sessions_[id] = s;
  asio::co_spawn(ex_, ExpireAt(s), asio::detached);
  co_return s->summary.client == client ? s : nullptr;
}

asio::awaitable<void> SessionManager::ExpireAt(SessionPtr s) {
  boost::system::error_code ec;
  do {  // again when SetExpiry moved the end (it cancels the wait)
    auto left = std::chrono::duration<double>(s->summary.expires_at - UnixNow());
    s->expiry.expires_after(std::chrono::duration_cast<std::chrono::milliseconds>(left));
    ec = {};
    co_await s->expiry.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  } while (ec == asio::error::operation_aborted && !s->ended);
  if (ec || s->ended) co_return;
  spdlog::info("session {} expired", ShortId(s->id));
  co_await End(s);
}

asio::awaitable<void> SessionManager::End(SessionPtr s) {
  if (s->ended) co_return;
  s->ended = true;
  sessions_.erase(s->id);
  RememberEnded(*s);
  s->expiry.cancel();
  if (s->busy && s->sandbox) s->sandbox->Kill();  // the call in flight ends, EndedDuringCall
  while (s->busy) co_await s->idle.Wait();
  s->idle.Notify();  // callers waiting for their turn see `ended`
  co_await StopEgress(*s);
  if (s->sandbox) co_await s->sandbox->Destroy();
  if (s->state == Session::State::kPaused) {
    if (auto record = snapshots_.Find(s->id)) snapshots_.Remove(*record);
  }
}

asio::awaitable<void> SessionManager::StopEgress(Session& s) {
  if (!s.egress) co_return;
  const SandboxEgress egress = std::move(*s.egress);
  s.egress.reset();
  co_await egress.Stop();
  const EgressReport report = co_await egress.Report();
  spdlog::info("session {} egress: {} destination(s) reached, {} connection(s) refused",
               ShortId(s.id), report.reached.size(), report.refused_count);
}

asio::awaitable<std::optional<ApiError>> SessionManager::SetNetwork(const std::string& id,
                                                                    const std::string& client,
                                                                    EgressPolicy policy) {
  SessionPtr s = co_await Find(id, client);
  if (!s) co_return NotFound(id);
  if (!s->egress_policy) {
    co_return ApiError{409, "session '" + id +
                                "' was created without a network (this server allows none: "
                                "EGRESS_ALLOW_MAX), so its policy cannot change"};
  }
  s->egress_policy = policy;  // a sandbox made for it later (a resume) gets this one
  if (s->egress) co_await s->egress->SetPolicy(std::move(policy));  // none while paused
  co_return std::nullopt;
}

void SessionManager::RememberEnded(const Session& s) {
  const double now = UnixNow();
  std::erase_if(ended_, [now](const auto& e) { return e.second < now; });
  ended_[s.id] = s.summary.expires_at;
}

asio::awaitable<void> SessionManager::Leave(SessionPtr s) {
  if (s->ended) co_return;
  s->ended = true;
  sessions_.erase(s->id);
  s->expiry.cancel();
  while (s->busy) co_await s->idle.Wait();  // the call in flight gets its answer
  s->idle.Notify();
  co_await StopEgress(*s);  // the proxy is this replica's: the sandbox left behind has no way out
}

asio::awaitable<bool> SessionManager::Exists(const std::string& id, const std::string& client) {
  co_return (co_await Find(id, client)) != nullptr;
}

asio::awaitable<bool> SessionManager::Delete(const std::string& id, const std::string& client) {
  SessionPtr s = co_await Find(id, client);
  if (!s) co_return false;
  co_await End(s);
  spdlog::info("session {} deleted", ShortId(id));
  co_return true;
}

asio::awaitable<std::variant<SessionSummary, ApiError>> SessionManager::SetExpiry(
    const std::string& id, const std::string& client, double expires_at) {
  SessionPtr s = co_await Find(id, client);
  if (!s || s->ended) co_return NotFound(id);
  if (expires_at > s->hard_end) {
    co_return ApiError{409, "Session " + id + " can live until " +
                                std::to_string(static_cast<int64_t>(s->hard_end)) +
                                " (unix time) at most: its sandbox ends then by itself."};
  }
  s->summary.expires_at = expires_at;
  s->expiry.cancel();  // ExpireAt waits again, for the new end
  co_return s->Summary();
}

asio::awaitable<std::vector<SessionSummary>> SessionManager::List(const std::string& client) {
  std::map<std::string, SessionSummary> all;
  auto held = co_await executor_.ListSessions();
  if (!held.ok()) {
    spdlog::warn("listing the backend's sessions: {} (listing this replica's only)",
                 held.status().message());
  }
  std::vector<SessionPtr> gone;
  if (held.ok() && *held) {
    for (const auto& h : **held) {
      if (!ended_.contains(h.id)) all[h.id] = {h.id, h.created_at, h.expires_at, h.client};
    }
    // Ours that the backend no longer holds were deleted through another replica, or their
    // sandbox died: they end here too.
    for (const auto& [id, s] : sessions_) {
      if (s->state == Session::State::kPaused) {
        all[id] = s->Summary();
      } else if (!all.contains(id)) {
        gone.push_back(s);
      } else {
        all[id].state = s->Summary().state;
      }
    }
  } else {
    for (const auto& [id, s] : sessions_) all[id] = s->Summary();
  }
  // Paused through another replica, or before this daemon restarted. The record wins over a
  // sandbox the backend still lists: a pause writes it before the sandbox goes (a pod's deletion
  // may still be under way), a resume removes it once the new sandbox holds the session.
  const double now = UnixNow();
  for (const SnapshotRecord& r : snapshots_.List("pause")) {
    if (r.client != client || r.expires_at <= now || ended_.contains(r.id)) continue;
    if (auto listed = all.find(r.id); listed != all.end()) {
      listed->second.state = "paused";
    } else {
      all[r.id] = {r.id, r.session_created_at, r.expires_at, r.client, "paused"};
    }
  }
  for (auto& s : gone) {
    spdlog::info("session {} ended: the backend no longer holds it", ShortId(s->id));
    co_await End(s);
  }
  std::vector<SessionSummary> out;
  for (auto& [id, summary] : all) {
    if (summary.client == client) out.push_back(std::move(summary));
  }
  co_return out;
}

asio::awaitable<SessionManager::Acquired> SessionManager::Acquire(const std::string& id,
                                                                  const std::string& client,
                                                                  bool wake) {
  SessionPtr s = co_await Find(id, client);
  if (!s) co_return Acquired{nullptr, NotFound(id)};
  while (s->busy && !s->ended) co_await s->idle.Wait();
  if (s->ended) co_return Acquired{nullptr, NotFound(id)};
  s->busy = true;
  if (wake && s->state != Session::State::kRunning) {
    if (auto refused = co_await Wake(*s)) {
      Release(s);
      if (refused->status == 410) co_await End(s);  // its snapshot is gone: nothing to resume
      co_return Acquired{nullptr, std::move(*refused)};
    }
  }
  co_return Acquired{s, {}};
}

void SessionManager::Release(const SessionPtr& s) {
  s->busy = false;
  s->last_used = UnixNow();
  s->idle.Notify();
}

asio::awaitable<std::variant<RunOutcome, ApiError>> SessionManager::Bash(
    const std::string& id, const std::string& client, std::string cmd,
    std::chrono::milliseconds timeout, OutputSink sink) {
  Acquired a = co_await Acquire(id, client);
  if (!a.s) co_return std::move(a.error);
  SessionPtr s = std::move(a.s);
  TellWoken(s->wake_notice, sink);
  RunPayload payload;
  payload.argv = {"bash", "-c", std::move(cmd)};
  payload.timeout = timeout;
  auto run = co_await s->sandbox->Run(std::move(payload), std::move(sink));
  if (auto e = co_await EndCall(s, run.status(), "bash call failed")) co_return std::move(*e);
  co_return std::move(run).value();
}

asio::awaitable<std::variant<std::unique_ptr<SandboxProcess>, ApiError>> SessionManager::Spawn(
    const std::string& id, const std::string& client, ProcessSpec spec) {
  if (auto why = OverKernelLimits(spec)) co_return ApiError{400, *why};
  const bool keeps_busy = spec.keeps_session_busy;
  Acquired a = co_await Acquire(id, client);
  if (!a.s) co_return std::move(a.error);
  SessionPtr s = std::move(a.s);
  auto started = co_await s->sandbox->Spawn(std::move(spec));
  Release(s);
  if (s->ended) co_return EndedDuringCall(*s);
  if (started.ok() && keeps_busy) {
    co_return std::make_unique<WatchedProcess>(std::move(*started), KeepBusy(id));
  }
  if (started.ok()) co_return std::move(*started);
  if (started.status().gone()) co_return co_await EndGone(s, started.status());
  if (started.status().unavailable()) co_return ApiError{429, started.status().message()};
  co_return ApiError{400, started.status().message()};
}

asio::awaitable<std::optional<ApiError>> SessionManager::Signal(const std::string& id,
                                                                const std::string& client,
                                                                uint32_t pid, int signal) {
  Acquired a = co_await Acquire(id, client);
  if (!a.s) co_return std::move(a.error);
  SessionPtr s = std::move(a.s);
  Status sent = co_await s->sandbox->Signal(pid, signal);
  co_return co_await EndCall(s, sent, "signal failed");
}

asio::awaitable<std::optional<ApiError>> SessionManager::EndCall(const SessionPtr& s,
                                                                 const Status& status,
                                                                 std::string_view what) {
  Release(s);
  if (s->ended) co_return EndedDuringCall(*s);
  if (status.ok()) co_return std::nullopt;
  if (status.gone()) co_return co_await EndGone(s, status);
  spdlog::warn("session {} {}: {}", ShortId(s->id), what, status.message());
  co_return Internal();
}

asio::awaitable<Result<RunOutcome>> SessionManager::StartInterpreter(Session& s) {
  RunPayload server;
  server.argv = PythonSessionServerArgv();
  server.background = true;
  server.serves_calls = true;
  server.timeout = 30s;
  OutputSink none = [](StreamKind, std::string_view) {};
  auto started = co_await s.sandbox->Run(std::move(server), std::move(none));
  if (started.ok()) s.interpreter_started = true;
  co_return started;
}

asio::awaitable<std::variant<ExecutionResult, ApiError>> SessionManager::Execute(
    const std::string& id, const std::string& client, SessionCall call, OutputSink sink) {
  Acquired a = co_await Acquire(id, client);
  if (!a.s) co_return std::move(a.error);
  SessionPtr s = std::move(a.s);
  TellWoken(s->wake_notice, sink);
  // Files the call may have written; the margin covers the kernel's coarse file timestamps (the
  // hash check drops what did not change).
  const int64_t started_ns = UnixNanos() - 2'000'000'000;
  bool fresh = !s->interpreter_started;
  Result<RunOutcome> run = Status::Error("not run");
  // Twice at most: the second time on a new interpreter when the old one had ended.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (fresh) {
      Result<RunOutcome> started = co_await StartInterpreter(*s);
      if (!started.ok()) {
        run = started.status();
        break;
      }
    }
    RunPayload payload;
    payload.call =
        PythonSessionRequest(call.code, call.last_line_interactive, call.timeout.count());
    payload.files = attempt == 0 ? call.inputs : std::vector<StagedFile>{};
    payload.stdin_data = call.stdin_data;
    // At the timeout the interpreter's own alarm interrupts the cell (the state survives); a cell
    // that does not let it is killed from outside after the grace (python_session.h).
    payload.timeout = call.timeout + kSessionCallGrace;
    run = co_await s->sandbox->Run(std::move(payload), sink);
    if (!run.ok() || !run->no_server || fresh) break;
    sink(StreamKind::kStderr, kStateLostNotice);
    fresh = true;
  }
  if (run.ok() && run->no_server) {
    run = Status::Error("the session's Python interpreter did not start");
  }
  ExecutionResult result;
  if (run.ok()) {
    bool truncated = false;
    auto snapshot = co_await Snapshot(*s, started_ns, &truncated, &result.results);
    if (snapshot.ok()) {
      for (auto& [file, changed] : *snapshot) {
        if (changed) result.files.push_back({file.path, file.file_id});
      }
      result.files_truncated = truncated;
    } else {
      run = snapshot.status();
    }
  }
  if (auto e = co_await EndCall(s, run.status(), "execute call failed")) co_return std::move(*e);
  result.run = std::move(run).value();
  result.resources.oom_killed = result.run.oom_killed;
  result.resources.cpu_ms = result.run.cpu_ms;
  co_return result;
}

asio::awaitable<Status> SessionManager::StageFiles(Session& s, std::vector<StagedFile> files) {
  // Staging rides on a run (both backends stage files before a program); `true` does nothing.
  RunPayload stage;
  stage.argv = {"true"};
  stage.files = files;
  stage.timeout = 30s;
  OutputSink none = [](StreamKind, std::string_view) {};
  auto staged = co_await s.sandbox->Run(std::move(stage), std::move(none));
  if (!staged.ok()) co_return staged.status();
  Remember(s, files);
  co_return Status();
}

void SessionManager::Remember(Session& s, const std::vector<StagedFile>& files) {
  for (const auto& f : files) {
    auto hash = HashFile(f.host_path);
    struct stat st {};
    if (!hash || ::stat(f.host_path.c_str(), &st) != 0) continue;
    s.known[f.workspace_path] = {static_cast<uint64_t>(st.st_size), *hash, ""};
  }
}

asio::awaitable<Result<std::vector<std::pair<WorkspaceFile, bool>>>> SessionManager::Snapshot(
    Session& s, int64_t modified_after_ns, bool* truncated, std::vector<std::string>* results) {
  std::string dir = store_.incoming_dir() + "/session-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) co_return Status::Errno("creating " + dir, errno);
  CollectLimits limits;
  limits.dest_dir = dir;
  limits.max_files = config_.max_workspace_files;
  limits.max_total_bytes = config_.workspace_size_mb << 20;
  limits.skip_path = "";
  limits.modified_after_ns = modified_after_ns;
  auto collection = co_await s.sandbox->Collect(limits);
  if (!collection.ok()) {
    rmdir(dir.c_str());
    co_return collection.status();
  }
  *truncated = collection->truncated;
  std::vector<std::string> bundles = TakeResultBundles(collection->files);
  if (results != nullptr) *results = std::move(bundles);
  std::vector<std::pair<WorkspaceFile, bool>> out;
  std::map<std::string, KnownFile> seen;
  for (const auto& f : collection->files) {
    std::string path = SanitizeUtf8(f.workspace_path);
    auto hash = HashFile(f.host_path).value_or(0);
    auto known = s.known.find(path);
    bool changed =
        known == s.known.end() || known->second.size != f.size || known->second.hash != hash;
    // An unchanged file keeps its id while the store still has it; otherwise it is stored anew.
    std::optional<FileMeta> stored;
    if (!changed && !known->second.file_id.empty()) stored = store_.Get(known->second.file_id);
    bool reuse_id = stored && stored->client == s.summary.client;
    KnownFile entry{f.size, hash, reuse_id ? known->second.file_id : ""};
    if (reuse_id) {
      unlink(f.host_path.c_str());
    } else {
      auto meta = store_.AdoptFile(f.host_path, path, nullptr, s.summary.client);
      if (!meta.ok()) {
        spdlog::error("saving session file {}: {}", path, meta.status().message());
        unlink(f.host_path.c_str());
        *truncated = true;  // left out: the listing says files are missing
        continue;
      }
      entry.file_id = meta->file_id;
    }
    seen[path] = entry;
    out.push_back({WorkspaceFile{path, f.size, entry.file_id}, changed});
  }
  // A whole listing replaces what is known (deleted files drop out); a partial one adds to it.
  if (modified_after_ns == 0) s.known.clear();
  for (auto& [path, entry] : seen) s.known[path] = std::move(entry);
  rmdir(dir.c_str());
  co_return out;
}

asio::awaitable<std::variant<std::vector<WorkspaceFile>, ApiError>> SessionManager::Files(
    const std::string& id, const std::string& client) {
  Acquired a = co_await Acquire(id, client);
  if (!a.s) co_return std::move(a.error);
  SessionPtr s = std::move(a.s);
  bool truncated = false;
  auto snapshot = co_await Snapshot(*s, /*modified_after_ns=*/0, &truncated);
  if (auto e = co_await EndCall(s, snapshot.status(), "files")) co_return std::move(*e);
  std::vector<WorkspaceFile> files;
  for (auto& [file, changed] : *snapshot) files.push_back(std::move(file));
  co_return files;
}

asio::awaitable<std::optional<ApiError>> SessionManager::Stage(const std::string& id,
                                                               const std::string& client,
                                                               std::vector<StagedFile> files) {
  Acquired a = co_await Acquire(id, client);
  if (!a.s) co_return std::move(a.error);
  SessionPtr s = std::move(a.s);
  Status staged = co_await StageFiles(*s, files);
  // What the session's own files make impossible (a symlink or a file where a path goes): the
  // caller's to fix, named.
  if (!staged.ok() && !staged.gone() && !s->ended) {
    Release(s);
    co_return ApiError{
        409, "The files could not be staged into the session's workspace: " + staged.message()};
  }
  co_return co_await EndCall(s, staged, "staging files");
}

asio::awaitable<void> SessionManager::DestroyAll() {
  ending_all_ = true;
  std::vector<SessionPtr> all;
  for (auto& [id, s] : sessions_) all.push_back(s);
  const bool keep = !executor_.sessions_outlive_daemon() && config_.snapshot_on_shutdown;
  for (auto& s : all) {
    if (executor_.sessions_outlive_daemon()) {
      co_await Leave(s);
      continue;
    }
    // Kept on disk, resumed by the first call after the restart (docs/sessions.md).
    if (keep && !s->busy && s->state != Session::State::kPaused) {
      s->busy = true;
      std::optional<ApiError> thawed;
      if (s->state == Session::State::kFrozen) thawed = co_await Wake(*s);
      std::variant<PauseOutcome, ApiError> paused = ApiError{500, "not paused"};
      if (!thawed) paused = co_await PauseToDisk(s);
      Release(s);
      if (auto* e = std::get_if<ApiError>(&paused)) {
        spdlog::error("session {} could not be kept over the restart: {}", ShortId(s->id),
                      e->detail);
      }
    }
    if (s->state == Session::State::kPaused) {  // on disk: the next daemon resumes it
      s->ended = true;
      s->expiry.cancel();
      sessions_.erase(s->id);
      s->idle.Notify();
      continue;
    }
    co_await End(s);
  }
  // Sessions being created end as soon as they exist (Create).
  while (creating_ > 0) co_await Sleep(10ms);
}

}  // namespace ci::daemon
