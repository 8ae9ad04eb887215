#include "daemon/service/warm_pool.h"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "core/sleep.h"

namespace ci::daemon {
namespace {}  // namespace

void WarmPool::Start(SandboxSpec spec) {
  spec_ = std::move(spec);
  Refill();
}

asio::awaitable<Result<std::unique_ptr<Sandbox>>> WarmPool::Prepare(const SandboxSpec& spec) {
  if (spec_ && !ready_.empty() && spec == *spec_) {
    std::unique_ptr<Sandbox> sandbox = std::move(ready_.front());
    ready_.pop_front();
    Refill();
    co_return sandbox;
  }
  Refill();
  auto cold = co_await inner_.Prepare(spec);
  co_return cold;
}

void WarmPool::Refill() {
  if (filling_ || draining_ || !spec_ || ready_.size() >= size_) return;
  filling_ = true;
  asio::co_spawn(ex_, Fill(), asio::detached);
}

asio::awaitable<void> WarmPool::Fill() {
  while (!draining_ && ready_.size() < size_) {
    auto prepared = co_await inner_.Prepare(*spec_);
    if (!prepared.ok()) {
      // Requests then take the cold path and report the error themselves; retry later. The
      // same failure again (a missing executor image for minutes) is not repeated as a warning.
      if (prepared.status().message() != last_error_) {
        spdlog::warn("warm pool: preparing a sandbox failed: {} (retrying every 1 s)",
                     prepared.status().message());
      } else {
        spdlog::debug("warm pool: preparing a sandbox failed again: {}",
                      prepared.status().message());
      }
      last_error_ = prepared.status().message();
      co_await Sleep(std::chrono::seconds(1));
      continue;
    }
    last_error_.clear();
    std::unique_ptr<Sandbox> sandbox = std::move(prepared).value();
    if (draining_) {
      co_await sandbox->Destroy();
      break;
    }
    ready_.push_back(std::move(sandbox));
  }
  filling_ = false;
}

asio::awaitable<void> WarmPool::Drain() {
  draining_ = true;
  while (filling_) co_await Sleep(std::chrono::milliseconds(10));
  while (!ready_.empty()) {
    std::unique_ptr<Sandbox> sandbox = std::move(ready_.front());
    ready_.pop_front();
    co_await sandbox->Destroy();
  }
  co_await inner_.Drain();
}

}  // namespace ci::daemon
