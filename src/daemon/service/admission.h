// Admission control (docs/api.md "Overload"): at most `limit` executions run at once; the rest
// wait in a FIFO queue for at most `queue_timeout`, then are refused (429). Single-threaded: it
// lives on the daemon's io_context.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>

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

  // A permit, or nullopt when no slot freed up within the queue timeout.
  boost::asio::awaitable<std::optional<Permit>> Acquire();

  uint32_t running() const { return running_; }
  size_t queued() const { return queue_.size(); }

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
  std::deque<std::shared_ptr<Waiter>> queue_;
};

}  // namespace ci::daemon
