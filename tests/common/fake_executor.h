// An in-process Executor for the daemon's own tests: it stands in for the kernel sandbox and
// nothing else. A sandbox is a temp directory (its /workspace); a "program" is a scripted
// coroutine the test chooses (FakeProgram) that sees the run's payload, writes output through the
// real OutputSink, sleeps on the asio executor and ends the way a real program ends. The fake
// enforces what a backend enforces from outside: the run's timeout (timed_out), Kill (the run
// fails), staging files before the program and collecting them after, the one-run rule of
// execution sandboxes, and the persistent-interpreter protocol of sessions (python_session.h).
// It counts Prepare/Destroy/Kill so a test can prove nothing leaks.
//
// Threads: the daemon runs on its own io_context thread; tests read counts and open gates from
// the test thread, so those are locked. Everything else runs on the daemon's thread.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "core/executor.h"
#include "core/json.h"

namespace ci::testing_support {

namespace asio = boost::asio;

class FakeSandbox;

// Opened by the test thread; a program waiting for it (FakeProcess::WaitFor) then goes on.
class FakeGate {
 public:
  void Open() { open_ = true; }
  bool is_open() const { return open_; }

 private:
  std::atomic<bool> open_{false};
};

// One persistent-Python cell (the request of python_session.h, as the fake's interpreter reads
// it).
struct FakeCell {
  std::string code;
  bool last_line_interactive = true;
  int64_t timeout_ms = 0;
};
template <typename V, json::Message<FakeCell> M>
void Fields(V& v, M& m) {
  v("code", m.code);
  v("last_line_interactive", m.last_line_interactive);
  v("timeout_ms", m.timeout_ms);
}

// The program as the script sees it while it runs.
class FakeProcess {
 public:
  FakeProcess(FakeSandbox& sandbox, const RunPayload& payload, OutputSink& sink,
              std::chrono::steady_clock::time_point deadline);

  const RunPayload& payload() const { return payload_; }
  // The parsed request when this run is a persistent-Python call, else nullptr.
  const FakeCell* cell() const { return cell_ ? &*cell_ : nullptr; }
  // The session interpreter's namespace: it survives calls until the interpreter ends.
  std::map<std::string, std::string>& globals();
  int sandbox_number() const;  // 1 for the first sandbox the executor prepared, then 2, ...

  // Files of /workspace (paths relative to it).
  std::string ReadFile(const std::string& path) const;  // "" when absent
  void WriteFile(const std::string& path, std::string_view content);

  // Output, dropped once the program was stopped (it is dead).
  void Write(StreamKind kind, std::string_view data);
  void Stdout(std::string_view data) { Write(StreamKind::kStdout, data); }
  void Stderr(std::string_view data) { Write(StreamKind::kStderr, data); }
  void WriteInChunks(StreamKind kind, std::string_view data, size_t chunk);

  // Pauses on the asio executor; returns early when the program is stopped (its timeout, a
  // Kill, or a cell's interrupt at the cell's own timeout).
  asio::awaitable<void> Sleep(std::chrono::steady_clock::duration d);
  // Waits until the test opens the gate, or the program is stopped.
  asio::awaitable<void> WaitFor(const FakeGate& gate);
  bool stopped() const;

  // How the program ends.
  RunOutcome Exit(int code) const;
  RunOutcome KilledBy(int signal) const;
  // The memory limit's OOM killer killed the program (the report says oom_killed).
  RunOutcome OomKill();
  // A fork was refused by the pids limit; the program then exits with `code`.
  RunOutcome HitPidsLimit(int code);
  // The sandbox dies under the program (its init killed from outside): this run and every later
  // one fail with Status::Gone.
  RunOutcome LoseSandbox();
  // Calls: the interpreter exits during the cell (the next call finds no server).
  RunOutcome EndInterpreter(int code);

 private:
  friend class FakeSandbox;
  FakeSandbox& sandbox_;
  const RunPayload& payload_;
  OutputSink& sink_;
  std::chrono::steady_clock::time_point deadline_;  // the run's timeout, enforced from outside
  std::optional<std::chrono::steady_clock::time_point> alarm_;  // a cell's own interrupt
  std::optional<FakeCell> cell_;
  bool timed_out_ = false;
  bool interrupted_ = false;  // a cell's alarm fired
};

// A scripted program: what one Run does. Returns how it ended.
using FakeProgram = std::function<asio::awaitable<RunOutcome>(FakeProcess&)>;

// Thread-safe counts of what the executor did.
struct FakeCounts {
  int prepared = 0;
  int destroyed = 0;
  int killed = 0;
  int runs_started = 0;          // programs started (argv runs and calls)
  int interpreters_started = 0;  // background programs serving calls
  int live() const { return prepared - destroyed; }
};

class FakeExecutor final : public Executor {
 public:
  struct Options {
    bool sessions = true;
  };
  FakeExecutor(asio::any_io_executor ex, Options options);
  ~FakeExecutor() override;

  // What argv runs do (one-off executions, session bash calls); by default exit 0. `true` (the
  // sessions' staging run) always exits 0 at once, as the real one does.
  void RunPrograms(FakeProgram program);
  // What persistent-Python calls do; by default answer status 0.
  void AnswerCalls(FakeProgram program);
  // The next `times` Prepare calls fail with `why`.
  void FailPrepare(Status why, int times = 1);
  // Prepare calls wait until `gate` opens (null: none), then go on as they would (a failure set
  // by FailPrepare meanwhile included).
  void HoldPrepares(const FakeGate* gate);
  // The sandboxes numbered so (1 is the first prepared) are gone when their first run starts, as
  // pooled containers are after their dockerd restarted: Run fails with Status::Gone.
  void LoseBeforeRun(std::set<int> numbers);
  // The sandboxes numbered so say they are dead (Sandbox::Alive), as a local one does once its
  // init exited while it waited in a pool.
  void DieWhileIdle(std::set<int> numbers);
  void SetHealth(Status status);

  FakeCounts counts() const;
  // Blocks the test thread until `pred` holds; false after a generous bound (a hang, not a
  // timing expectation).
  bool WaitUntil(const std::function<bool(const FakeCounts&)>& pred) const;

  std::string_view name() const override { return "fake"; }
  asio::awaitable<Result<std::unique_ptr<Sandbox>>> Prepare(const SandboxSpec& spec) override;
  asio::awaitable<Status> Check() override;
  std::string network_isolation() const override { return "none: an in-process fake"; }
  Enforcement enforcement(const SandboxSpec& spec) const override;
  bool supports_sessions() const override { return options_.sessions; }

 private:
  friend class FakeSandbox;
  friend class FakeProcess;
  void Count(const std::function<void(FakeCounts&)>& change);
  FakeProgram Script(bool call) const;
  bool LostBeforeRun(int number) const;
  bool DiedWhileIdle(int number) const;

  asio::any_io_executor ex_;
  Options options_;
  std::string root_;  // every sandbox's directory is under it
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  FakeCounts counts_;
  FakeProgram programs_, calls_;
  std::deque<Status> prepare_failures_;
  const FakeGate* prepare_gate_ = nullptr;
  std::set<int> lost_before_run_;
  std::set<int> died_while_idle_;
  Status health_;
};

}  // namespace ci::testing_support
