// Warm pools of prepared sandboxes in front of any Executor (docs/architecture.md "Warm pool").
// Prepare() hands out a sandbox that was set up in the background when the asked spec is one of
// the pools', and starts a refill; a client with an API key gets the sandbox its last program ran
// in first, where the backend put one back for it (Executor::TakeRecycled).
// A Python pool's sandboxes hold an interpreter already started (SandboxSpec::prestart_argv); a
// sandbox made on the spot for a request (the pool was empty, or there is none) does not
// pre-start, since the warm imports pay off only ahead of time. A request that finds its pool
// empty while a refill is under way waits for that refill's sandbox (one request at a time).
// Single-threaded: it lives on the daemon's io_context.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/executor.h"
#include "core/refill_backoff.h"
#include "daemon/service/async_event.h"

namespace ci::daemon {

struct WarmPoolConfig {
  std::string
      name;  // what /metrics calls it: the languages it serves ("python", "bash+javascript")
  SandboxSpec spec;
  size_t size = 0;
};

// What /metrics shows of one pool.
struct WarmPoolStats {
  std::string name;
  size_t size = 0;
  size_t ready = 0;
  uint64_t hits = 0;     // requests served by a pooled sandbox
  uint64_t misses = 0;   // requests of this pool's spec that found it empty: waited or made one
  uint64_t waits = 0;    // of those, served by the refill under way
  uint64_t refills = 0;  // sandboxes added after a take
  uint64_t dead = 0;     // pooled sandboxes found gone when taken, replaced instead
  uint64_t fill_failures = 0;  // Prepares of the pool's own that failed
  double refill_lag_sum = 0;   // seconds from each take to its replacement being ready
  double refill_lag_max = 0;
};

class WarmPool final : public Executor {
 public:
  WarmPool(asio::any_io_executor ex, Executor& inner) : ex_(std::move(ex)), inner_(inner) {}

  // Begins keeping each pool filled (a pool of size 0 is left out).
  void Start(const std::vector<WarmPoolConfig>& pools);
  // Stops refilling, destroys the pooled sandboxes and drains the backend (shutdown).
  asio::awaitable<void> Drain() override;
  size_t ready() const;
  std::vector<WarmPoolStats> stats() const;

  std::string_view name() const override { return inner_.name(); }
  bool root_on_this_host() const override { return inner_.root_on_this_host(); }
  bool runs_python_fork_server() const override { return inner_.runs_python_fork_server(); }
  bool runs_lean_python() const override { return inner_.runs_lean_python(); }
  asio::awaitable<Result<std::unique_ptr<Sandbox>>> Prepare(const SandboxSpec& spec) override;
  asio::awaitable<std::unique_ptr<Sandbox>> TakeRecycled(const SandboxSpec& spec) override {
    return inner_.TakeRecycled(spec);
  }
  asio::awaitable<Status> Check() override { return inner_.Check(); }
  std::string network_isolation() const override { return inner_.network_isolation(); }
  Enforcement enforcement(const SandboxSpec& spec) const override {
    return inner_.enforcement(spec);
  }
  bool supports_sessions() const override { return inner_.supports_sessions(); }
  std::vector<Downgrade> downgrades() const override { return inner_.downgrades(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Pool {
    WarmPoolConfig config;
    std::deque<std::unique_ptr<Sandbox>> ready;
    std::deque<Clock::time_point> taken_at;  // takes not yet replaced, oldest first
    bool filling = false;
    std::unique_ptr<AsyncEvent> filled;  // notified as a fill adds a sandbox, fails or ends
    bool awaited = false;                // a request waits for the fill under way
    std::string last_error;              // the last failed fill's, logged once until it changes
    int failures = 0;                    // failed Prepares in a row
    std::unique_ptr<asio::steady_timer> backoff;  // cancelled: try again now
    WarmPoolStats stats;
  };

  // A pooled sandbox still alive, or null; dead ones are dropped (and counted).
  std::unique_ptr<Sandbox> TakeReady(Pool& pool);
  void Refill(Pool& pool);
  asio::awaitable<void> Fill(Pool& pool);

  asio::any_io_executor ex_;
  Executor& inner_;
  std::vector<std::unique_ptr<Pool>> pools_;  // stable addresses: fills hold a reference
  bool draining_ = false;
};

}  // namespace ci::daemon
