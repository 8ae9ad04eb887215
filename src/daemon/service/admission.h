// Admission control (docs/api.md "Overload"): at most `limit` executions run at once; the rest
// wait for at most `queue_timeout`, then are refused (429). Waiters queue per client (API key)
// and a freed slot goes to the clients in turn, each client's own in arrival order: one key's
// flood delays another key's execution by one slot's turn, not by the flood (issue #30 item 6).
// Single-threaded: it lives on the daemon's io_context.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace ci::daemon {

class Admission {
 public:
  // Holds one execution slot; gives it to the next waiter (or frees it) when destroyed.
  class Permit {
   public:
    explicit Permit(Admission* owner) : owner_(owner) {}
    Permit(Permit&& o) noexcept : owner_(std::exchange(o.owner_, nullptr)) {}
    Permit& operator=(Permit&&) = delete;
    ~Permit() {
      if (owner_ != nullptr) owner_->Release();
    }

   private:
    Admission* owner_;
  };

  Admission(boost::asio::any_io_executor ex, uint32_t limit,
            std::chrono::steady_clock::duration queue_timeout)
      : ex_(std::move(ex)), limit_(limit), queue_timeout_(queue_timeout) {}

  // A permit for `client` ("" without API keys), or nullopt when no slot freed up for it within
  // the queue timeout.
  boost::asio::awaitable<std::optional<Permit>> Acquire(const std::string& client = "");

  uint32_t running() const { return running_; }
  size_t queued() const { return queued_; }

 private:
  struct Waiter {
    explicit Waiter(const boost::asio::any_io_executor& ex) : timer(ex) {}
    boost::asio::steady_timer timer;
    bool granted = false;
  };
  void Release();

  boost::asio::any_io_executor ex_;
  uint32_t limit_;
  std::chrono::steady_clock::duration queue_timeout_;
  uint32_t running_ = 0;
  size_t queued_ = 0;
  std::map<std::string, std::deque<std::shared_ptr<Waiter>>> waiting_;  // by client
  std::deque<std::string> turns_;  // the clients with waiters, the next one to serve first
};

}  // namespace ci::daemon
