// A warm pool of prepared sandboxes in front of any Executor (docs/architecture.md "Warm pool").
// Prepare() hands out a sandbox that was set up in the background, when the asked spec is the
// pool's, and starts a refill; each sandbox is used once and destroyed by its user as before.
// Single-threaded: it lives on the daemon's io_context.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <deque>
#include <memory>
#include <string>

#include "core/executor.h"

namespace ci::daemon {

class WarmPool final : public Executor {
 public:
  WarmPool(asio::any_io_executor ex, Executor& inner, size_t size)
      : ex_(std::move(ex)), inner_(inner), size_(size) {}

  // Begins keeping `size` sandboxes of `spec` ready.
  void Start(SandboxSpec spec);
  // Stops refilling, destroys the pooled sandboxes and drains the backend (shutdown).
  asio::awaitable<void> Drain() override;
  size_t ready() const { return ready_.size(); }

  std::string_view name() const override { return inner_.name(); }
  asio::awaitable<Result<std::unique_ptr<Sandbox>>> Prepare(const SandboxSpec& spec) override;
  asio::awaitable<Status> Check() override { return inner_.Check(); }
  std::string network_isolation() const override { return inner_.network_isolation(); }
  Enforcement enforcement(const SandboxSpec& spec) const override {
    return inner_.enforcement(spec);
  }
  bool supports_sessions() const override { return inner_.supports_sessions(); }

 private:
  void Refill();
  asio::awaitable<void> Fill();

  asio::any_io_executor ex_;
  Executor& inner_;
  size_t size_;
  std::optional<SandboxSpec> spec_;  // set by Start
  std::deque<std::unique_ptr<Sandbox>> ready_;
  bool filling_ = false;
  bool draining_ = false;
  std::string last_error_;  // the last failed fill's, logged once until it changes
};

}  // namespace ci::daemon
