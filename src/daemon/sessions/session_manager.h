// Sessions (api.md "Sessions"): long-lived session sandboxes by id, one call at a time each, ended
// at their TTL or on delete. Bash calls, persistent-Python calls (python_session.h), and files in
// and out. Single-threaded: it lives on the daemon's io_context.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "core/executor.h"
#include "daemon/config/config.h"
#include "daemon/files/file_store.h"
#include "daemon/service/async_event.h"
#include "daemon/service/execution_service.h"
#include "daemon/service/sandbox_egress.h"
#include "daemon/sessions/session_snapshots.h"

namespace ci::daemon {

struct SessionSummary {
  std::string id;
  double created_at = 0;  // unix seconds
  double expires_at = 0;
  std::string client;  // the API key's name that created it (HttpExchange::client)
  // "running", "frozen" (its processes stopped, kept in memory) or "paused" (on disk only).
  std::string state = "running";
};

// What a pause did, or what a resume brought back (docs/sessions.md).
struct PauseOutcome {
  std::string state;              // "frozen" or "paused"
  std::string why_not_frozen;     // memory was asked for but the backend cannot freeze
  std::vector<std::string> lost;  // what will not come back (a snapshot's)
};
struct ResumeOutcome {
  bool was_running = false;       // nothing to resume
  bool from_snapshot = false;     // a new sandbox, from the files and the Python state
  std::vector<std::string> lost;  // what did not come back
};

struct WorkspaceFile {
  std::string path;
  uint64_t size = 0;
  std::string file_id;
};

// One persistent-Python call: the /v1/execute body with its files resolved.
struct SessionCall {
  std::string code;
  std::optional<std::string> stdin_data;
  std::chrono::milliseconds timeout{2000};
  bool last_line_interactive = true;
  std::vector<StagedFile> inputs;
};

class SessionManager {
 public:
  // `share_of`: the sessions an API key may hold (key_quotas.h); empty: no share below
  // MAX_SESSIONS.
  SessionManager(asio::any_io_executor ex, const Config& config, Executor& executor,
                 FileStore& store, const SandboxSpec& spec, const EgressShared& egress,
                 std::function<uint32_t(const std::string&)> share_of = {});

  bool supported() const { return executor_.supports_sessions(); }
  // 503 (api.md "Overload") when MAX_SESSIONS sessions are live or being created; 429 when
  // `client` (an API key's name) holds its share (MAX_SESSIONS_PER_KEY or its `sessions=`).
  std::optional<ApiError> CapacityError(const std::string& client) const;
  static ApiError NotFound(const std::string& id);

  // Every call names the session's `client` (HttpExchange::client): another client's session is
  // one that does not exist.
  // `egress`: the session's programs reach the daemon's proxy with that policy (docs/egress.md;
  // one without rules refuses everything until SetNetwork); none: no network at all.
  // `from`: a snapshot (SnapshotFor) whose files and Python state the session starts with.
  asio::awaitable<std::variant<SessionSummary, ApiError>> Create(
      std::vector<StagedFile> files, int64_t ttl_seconds, const std::string& client,
      std::optional<EgressPolicy> egress = std::nullopt,
      std::optional<SnapshotRecord> from = std::nullopt);

  // Pause (docs/sessions.md): `memory` freezes it where the backend can (else, and without
  // `memory`, snapshots it to disk and removes its sandbox). 409 when it is already paused.
  asio::awaitable<std::variant<PauseOutcome, ApiError>> Pause(const std::string& id,
                                                              const std::string& client,
                                                              bool memory);
  // Thaws or restores it now (every call does so by itself).
  asio::awaitable<std::variant<ResumeOutcome, ApiError>> Resume(const std::string& id,
                                                                const std::string& client);
  // `count` new sessions of the client's, each with a copy of the files and Python state, each
  // with `ttl_seconds` (0: the source's time left); one answer per fork.
  asio::awaitable<std::variant<std::vector<std::variant<SessionSummary, ApiError>>, ApiError>> Fork(
      const std::string& id, const std::string& client, uint32_t count, int64_t ttl_seconds);
  // A named snapshot of the session, kept until deleted, to start sessions from.
  asio::awaitable<std::variant<SnapshotRecord, ApiError>> TakeSnapshot(const std::string& id,
                                                                       const std::string& client,
                                                                       std::string name);
  // The client's named snapshot by id or name (404 when none).
  std::variant<SnapshotRecord, ApiError> SnapshotFor(const std::string& id_or_name,
                                                     const std::string& client) const;
  std::vector<SnapshotRecord> Snapshots(const std::string& client) const;
  bool DeleteSnapshot(const std::string& id_or_name, const std::string& client);
  // "running", "frozen" or "paused" of a session of this replica's ("" for another).
  std::string StateOf(const std::string& id) const {
    auto it = sessions_.find(id);
    return it == sessions_.end() ? "" : it->second->Summary().state;
  }
  // Holds session `id` in use while the result lives (an E2B cell): the idle sweep leaves it.
  std::shared_ptr<void> KeepBusy(const std::string& id);
  // What a front keeps with the client's session `id` (E2B's sandbox record): saved with it when
  // it is paused to disk, so that it outlives this daemon with the session. false: no session.
  bool Attach(const std::string& id, const std::string& client, std::string attachment);
  // The session `id` (any client's, here or paused in the store) with what is attached to it.
  struct Attached {
    std::string client;
    std::string attachment;
    SessionSummary summary;
  };
  asio::awaitable<std::optional<Attached>> AttachmentOf(const std::string& id);
  // Starts the idle sweep (SESSION_IDLE_PAUSE_SEC, SESSION_IDLE_SNAPSHOT_SEC) and the removal of
  // paused sessions past their end that no replica holds.
  void StartSweeps();
  // The session's egress policy from now on (E2B's updateNetwork); 409 for a session made
  // without a proxy.
  asio::awaitable<std::optional<ApiError>> SetNetwork(const std::string& id,
                                                      const std::string& client,
                                                      EgressPolicy policy);
  // The client's session `id` exists (here, or in the backend for any replica): a stream checks
  // before it starts, so an unknown session is a 404 and not an error event.
  asio::awaitable<bool> Exists(const std::string& id, const std::string& client);
  // false: no such session
  asio::awaitable<bool> Delete(const std::string& id, const std::string& client);
  // Moves the session's end to `expires_at` (unix seconds): sooner, or later up to the end it was
  // created with (its sandbox ends then by itself: 409 past it). The new end is this replica's.
  asio::awaitable<std::variant<SessionSummary, ApiError>> SetExpiry(const std::string& id,
                                                                    const std::string& client,
                                                                    double expires_at);
  // This replica's sessions and those the backend holds for any replica (kubernetes).
  asio::awaitable<std::vector<SessionSummary>> List(const std::string& client);

  asio::awaitable<std::variant<RunOutcome, ApiError>> Bash(const std::string& id,
                                                           const std::string& client,
                                                           std::string cmd,
                                                           std::chrono::milliseconds timeout,
                                                           OutputSink sink);
  asio::awaitable<std::variant<ExecutionResult, ApiError>> Execute(const std::string& id,
                                                                   const std::string& client,
                                                                   SessionCall call,
                                                                   OutputSink sink);
  // A process beside the session's calls (core/executor.h ProcessSpec), started between them:
  // 400 naming why it did not start (no such cwd), 429 when the sandbox's process limit is
  // reached, 410 when the sandbox is gone.
  asio::awaitable<std::variant<std::unique_ptr<SandboxProcess>, ApiError>> Spawn(
      const std::string& id, const std::string& client, ProcessSpec spec);
  asio::awaitable<std::optional<ApiError>> Signal(const std::string& id, const std::string& client,
                                                  uint32_t pid, int signal);
  asio::awaitable<std::variant<std::vector<WorkspaceFile>, ApiError>> Files(
      const std::string& id, const std::string& client);
  asio::awaitable<std::optional<ApiError>> Stage(const std::string& id, const std::string& client,
                                                 std::vector<StagedFile> files);

  // Shutdown: every session ends now, or is left to the backend when it outlives the daemon
  // (Executor::sessions_outlive_daemon).
  asio::awaitable<void> DestroyAll();
  size_t count() const { return Live(); }  // sessions holding a sandbox

 private:
  struct KnownFile {
    uint64_t size = 0;
    uint64_t hash = 0;
    std::string file_id;
  };
  struct Session {
    explicit Session(const asio::any_io_executor& ex) : expiry(ex), idle(ex) {}
    std::string id;
    std::unique_ptr<Sandbox> sandbox;  // none while paused
    enum class State { kRunning, kFrozen, kPaused } state = State::kRunning;
    // `summary` with the state of now (summary.state itself is never set).
    SessionSummary Summary() const {
      SessionSummary out = summary;
      out.state = state == State::kRunning  ? "running"
                  : state == State::kFrozen ? "frozen"
                                            : "paused";
      return out;
    }
    double running_left = 0;  // frozen or paused: the seconds of its TTL it had left
    double hard_left = 0;     // paused: the same of hard_end
    double last_used = 0;     // unix seconds its last call ended
    // Holders of KeepBusy's (processes started beside its calls, E2B cells): the idle sweep
    // leaves it be.
    int in_use = 0;
    std::string wake_notice;  // what the next call's stderr says (resumed from a snapshot)
    std::vector<std::string> resumed_lost;      // the same for Resume's answer
    std::string attachment;                     // Attach's
    std::optional<EgressPolicy> egress_policy;  // its proxy's policy (a new sandbox gets it)
    SessionSummary summary;
    double hard_end = 0;  // when the sandbox ends by itself (SandboxSpec::session_expires_at)
    asio::steady_timer expiry;
    AsyncEvent idle;  // notified when a call ends
    bool busy = false;
    bool ended = false;  // deleted or expired
    bool interpreter_started = false;
    std::optional<SandboxEgress> egress;     // its proxy, for its whole life
    std::map<std::string, KnownFile> known;  // workspace files as last seen (outputs by change)
  };
  using SessionPtr = std::shared_ptr<Session>;

  // This replica's session `id`, or the backend's (Executor::FindSession), served here from now
  // on; nullptr when neither has it, or it is another client's.
  asio::awaitable<SessionPtr> Find(const std::string& id, const std::string& client);
  // Waits for the session's current call and wakes it (thawed, or restored from its snapshot);
  // `s` null when it does not exist (or ended meanwhile: `error` 404) or could not be woken.
  struct Acquired {
    SessionPtr s;
    ApiError error;
  };
  asio::awaitable<Acquired> Acquire(const std::string& id, const std::string& client,
                                    bool wake = true);
  asio::awaitable<std::optional<ApiError>> Wake(Session& s);
  // A sandbox for `s` (its id, times, client and egress policy): s.sandbox and s.egress set.
  asio::awaitable<std::optional<ApiError>> NewSandbox(Session& s, std::vector<StagedFile>& files);
  // Saves the files and Python state of `s` (acquired, running) as a snapshot record.
  asio::awaitable<std::variant<SnapshotRecord, ApiError>> SaveSnapshot(Session& s, std::string kind,
                                                                       std::string id,
                                                                       std::string name);
  // Into the fresh sandbox of `s`: the snapshot's files and Python state; what did not come.
  asio::awaitable<std::variant<std::vector<std::string>, ApiError>> Restore(
      Session& s, const SnapshotRecord& record);
  // Snapshots `s` (acquired) to disk and removes its sandbox: it is paused.
  asio::awaitable<std::variant<PauseOutcome, ApiError>> PauseToDisk(const SessionPtr& s);
  // A paused session of the store's (another replica's, or before a restart), served here.
  SessionPtr Adopt(const SnapshotRecord& record);
  asio::awaitable<void> SweepIdle();
  // Frozen from now on: the pause's end is its end (never past its sandbox's).
  void MarkFrozen(Session& s);
  size_t Live() const;  // sessions holding a sandbox (MAX_SESSIONS counts these)
  // Paused sessions cost no slot but a record in memory each: a key holds at most
  // kPausedPerLive times its share of live ones, a replica that many times MAX_SESSIONS.
  static constexpr size_t kPausedPerLive = 8;
  std::optional<ApiError> PausedCapacityError(const std::string& client) const;
  void Release(const SessionPtr& s);
  asio::awaitable<std::variant<SessionSummary, ApiError>> CreateSandbox(
      std::vector<StagedFile> files, int64_t ttl_seconds, const std::string& client,
      std::optional<EgressPolicy> egress, const std::optional<SnapshotRecord>& from);
  asio::awaitable<void> End(SessionPtr s);
  // Its proxy closes, what it reached is logged.
  asio::awaitable<void> StopEgress(Session& s);
  // Stops serving it here, its sandbox left running (shutdown, when sessions outlive us).
  asio::awaitable<void> Leave(SessionPtr s);
  asio::awaitable<void> ExpireAt(SessionPtr s);
  ApiError EndedDuringCall(const Session& s) const;
  // The sandbox died under the session (killed from outside, OOM-killed init, container
  // stopped): the session is ended, its slot freed, and the call answers 410 saying so.
  asio::awaitable<ApiError> EndGone(SessionPtr s, const Status& why);
  // After a call on an acquired session: releases it, and says what the client gets when the
  // call did not succeed (ended meanwhile, sandbox gone, or failed: logged with `what`); nullopt
  // when `status` is ok.
  asio::awaitable<std::optional<ApiError>> EndCall(const SessionPtr& s, const Status& status,
                                                   std::string_view what);
  asio::awaitable<Result<RunOutcome>> StartInterpreter(Session& s);
  asio::awaitable<Status> StageFiles(Session& s, std::vector<StagedFile> files);
  // Staged inputs count as known, so a call does not return them unless it changed them.
  void Remember(Session& s, const std::vector<StagedFile>& files);
  // Collects the workspace (only files modified after `modified_after_ns` unless 0); returns
  // them with ids and marks those new or changed since the session last looked. The rich
  // results file is never one of them: its results go to `results` (when not null).
  asio::awaitable<Result<std::vector<std::pair<WorkspaceFile, bool>>>> Snapshot(
      Session& s, int64_t modified_after_ns, bool* truncated,
      std::vector<std::string>* results = nullptr);

  asio::any_io_executor ex_;
  const Config& config_;
  const EgressShared& egress_shared_;
  std::function<uint32_t(const std::string&)> share_of_;
  Executor& executor_;
  FileStore& store_;
  SandboxSpec spec_;
  SnapshotStore snapshots_;
  std::map<std::string, SessionPtr> sessions_;
  size_t creating_ = 0;  // sessions being set up, counted against MAX_SESSIONS
  std::map<std::string, size_t> creating_by_client_;  // and against each key's share
  bool ending_all_ = false;                           // DestroyAll (shutdown) began
  std::set<std::string> finding_;                     // ids being looked up in the backend
  // Sessions ended here, until their expiry: never found in the backend again.
  std::map<std::string, double> ended_;
  void RememberEnded(const Session& s);
};

}  // namespace ci::daemon
