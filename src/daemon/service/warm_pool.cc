#include "daemon/service/warm_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "core/sleep.h"

namespace ci::daemon {

void WarmPool::Start(const std::vector<WarmPoolConfig>& pools) {
  for (const WarmPoolConfig& config : pools) {
    if (config.size == 0 || inner_.KeepSharedPool(config.spec, config.size)) continue;
    auto pool = std::make_unique<Pool>();
    pool->filled = std::make_unique<AsyncEvent>(ex_);
    pool->backoff = std::make_unique<asio::steady_timer>(ex_);
    pool->config = config;
    pool->stats.name = config.name;
    pool->stats.size = config.size;
    pools_.push_back(std::move(pool));
  }
  for (auto& pool : pools_) Refill(*pool);
}

asio::awaitable<Result<std::unique_ptr<Sandbox>>> WarmPool::Prepare(const SandboxSpec& spec) {
  if (!spec.client.empty()) {  // the client's own put-back sandbox first (Executor::TakeRecycled)
    SandboxSpec now = spec;
    now.prestart_argv.clear();  // started at the run, as on the cold path below
    auto take = inner_.TakeRecycled(now);
    std::unique_ptr<Sandbox> own = co_await std::move(take);
    if (own) co_return own;
  }
  // Pooled sandboxes are fresh or last ran the client "" (every request without API keys, and
  // the daemon's own probes): any client may take one.
  SandboxSpec unclaimed = spec;
  unclaimed.client.clear();
  auto match = std::find_if(pools_.begin(), pools_.end(),
                            [&](const auto& p) { return p->config.spec == unclaimed; });
  if (match != pools_.end()) {
    Pool& pool = **match;
    std::unique_ptr<Sandbox> sandbox = TakeReady(pool);
    if (sandbox) {
      ++pool.stats.hits;
    } else {
      ++pool.stats.misses;
      Refill(pool);
      // The refill under way is nearer done than a sandbox made now, which would compete with it
      // for the CPU: one request at a time waits for it (a failing one is not waited for).
      if (pool.filling && !pool.awaited) {
        pool.awaited = true;
        while (pool.ready.empty() && pool.filling && pool.last_error.empty()) {
          co_await pool.filled->Wait();
        }
        pool.awaited = false;
        sandbox = TakeReady(pool);
        if (sandbox) ++pool.stats.waits;
      }
    }
    if (sandbox) {
      pool.taken_at.push_back(Clock::now());
      Refill(pool);
      co_return sandbox;
    }
  }
  SandboxSpec now = spec;
  now.prestart_argv.clear();
  auto cold = co_await inner_.Prepare(now);
  // The backend starts sandboxes again: a pool backing off tries now.
  if (cold.ok() && match != pools_.end() && (*match)->failures > 0) (*match)->backoff->cancel();
  co_return cold;
}

std::unique_ptr<Sandbox> WarmPool::TakeReady(Pool& pool) {
  while (!pool.ready.empty() && !pool.ready.front()->Alive()) {
    // Died while it waited (its parent killed, the host's OOM killer): replaced, not handed out.
    std::shared_ptr<Sandbox> dead = std::move(pool.ready.front());
    pool.ready.pop_front();
    ++pool.stats.dead;
    asio::co_spawn(
        ex_, [dead]() -> asio::awaitable<void> { co_await dead->Destroy(); }, asio::detached);
  }
  if (pool.ready.empty()) return nullptr;
  std::unique_ptr<Sandbox> sandbox = std::move(pool.ready.front());
  pool.ready.pop_front();
  return sandbox;
}

size_t WarmPool::ready() const {
  size_t n = 0;
  for (const auto& pool : pools_) n += pool->ready.size();
  return n;
}

std::vector<WarmPoolStats> WarmPool::stats() const {
  std::vector<WarmPoolStats> out;
  for (const auto& pool : pools_) {
    out.push_back(pool->stats);
    out.back().ready = pool->ready.size();
  }
  return out;
}

void WarmPool::Refill(Pool& pool) {
  if (pool.filling || draining_ || pool.ready.size() >= pool.config.size) return;
  pool.filling = true;
  // Posted, not started here: starting a sandbox blocks this thread for a moment (the fork
  // server's answer), and the request that took the pooled one goes first.
  asio::post(ex_, [this, &pool] { asio::co_spawn(ex_, Fill(pool), asio::detached); });
}

asio::awaitable<void> WarmPool::Fill(Pool& pool) {
  while (!draining_ && pool.ready.size() < pool.config.size) {
    auto prepared = co_await inner_.Prepare(pool.config.spec);
    if (!prepared.ok()) {
      // Requests then take the cold path and report the error themselves; retry later. The
      // same failure again (a missing executor image for minutes) is not repeated as a warning.
      const std::string& why = prepared.status().message();
      ++pool.stats.fill_failures;
      const std::chrono::seconds wait = RefillBackoff(++pool.failures);
      if (why != pool.last_error) {
        spdlog::warn(
            "warm pool {}: preparing a sandbox failed: {} (next try in {} s, waiting up "
            "to 5 min while it fails)",
            pool.config.name, why, wait.count());
      } else {
        spdlog::debug("warm pool {}: preparing a sandbox failed again: {} (next try in {} s)",
                      pool.config.name, why, wait.count());
      }
      pool.last_error = why;
      pool.filled->Notify();  // a request waiting for this fill makes its own sandbox
      pool.backoff->expires_after(wait);
      boost::system::error_code ec;
      co_await pool.backoff->async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    if (pool.failures > 0) {
      spdlog::info("warm pool {}: preparing sandboxes works again", pool.config.name);
    }
    pool.failures = 0;
    pool.last_error.clear();
    std::unique_ptr<Sandbox> sandbox = std::move(prepared).value();
    if (draining_) {
      co_await sandbox->Destroy();
      break;
    }
    pool.ready.push_back(std::move(sandbox));
    pool.filled->Notify();
    if (!pool.taken_at.empty()) {
      const double lag =
          std::chrono::duration<double>(Clock::now() - pool.taken_at.front()).count();
      pool.taken_at.pop_front();
      ++pool.stats.refills;
      pool.stats.refill_lag_sum += lag;
      pool.stats.refill_lag_max = std::max(pool.stats.refill_lag_max, lag);
    }
  }
  pool.filling = false;
  pool.filled->Notify();
}

asio::awaitable<void> WarmPool::Drain() {
  draining_ = true;
  for (auto& pool : pools_) {
    pool->backoff->cancel();
    while (pool->filling) co_await Sleep(std::chrono::milliseconds(10));
    while (!pool->ready.empty()) {
      std::unique_ptr<Sandbox> sandbox = std::move(pool->ready.front());
      pool->ready.pop_front();
      co_await sandbox->Destroy();
    }
  }
  co_await inner_.Drain();
}

}  // namespace ci::daemon
