// Admission control (docs/api.md "Overload"): at most `limit` holders at once (executions, or the
// agent loop's model calls); the rest wait for at most `queue_timeout`, then are refused (429).
// Waiters queue per client (API key) and a freed slot goes to the clients in turn, each client's
// own in arrival order: one key's flood delays another key's request by one slot's turn, not by
// the flood. A client holds at most its share (share_of) at once, so a key cannot take every
// slot for as long as its work runs (issue #30 item 6). Single-threaded: it lives on the
// daemon's io_context.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace ci::daemon {

class Admission {
 public:
  // Holds one slot of a client; gives it to the next waiter (or frees it) when destroyed.
  class Permit {
   public:
    Permit(Admission* owner, std::string client) : owner_(owner), client_(std::move(client)) {}
    Permit(Permit&& o) noexcept
        : owner_(std::exchange(o.owner_, nullptr)), client_(std::move(o.client_)) {}
    Permit& operator=(Permit&&) = delete;
    ~Permit() {
      if (owner_ != nullptr) owner_->Release(client_);
    }

   private:
    Admission* owner_;
    std::string client_;
  };

  // How many slots `client` may hold at once (capped at the limit); empty: the whole limit.
  using ShareOf = std::function<uint32_t(const std::string& client)>;

  Admission(boost::asio::any_io_executor ex, uint32_t limit,
            std::chrono::steady_clock::duration queue_timeout, ShareOf share_of = {})
      : ex_(std::move(ex)),
        limit_(limit),
        queue_timeout_(queue_timeout),
        share_of_(std::move(share_of)) {}

  // A permit for `client` ("" without API keys), or nullopt when none freed up for it within the
  // queue timeout (at once when its share is 0).
  boost::asio::awaitable<std::optional<Permit>> Acquire(const std::string& client = "");

  uint32_t running() const { return running_; }
  size_t queued() const { return queued_; }
  uint32_t running_of(const std::string& client) const;
  uint32_t share(const std::string& client) const;
  // Why `client` got no permit: its share is 0 (403), it holds its share, or every slot is taken.
  enum class Refusal { kForbidden, kAtShare, kFull };
  Refusal WhyRefused(const std::string& client) const;
  int RefusalStatus(const std::string& client) const {
    return WhyRefused(client) == Refusal::kForbidden ? 403 : 429;
  }
  // The detail of a refused execution (one-off, session call, tool or agent run).
  std::string ExecutionRefusal(const std::string& client) const;
  // The shares changed (the key file was read again): free slots go to the waiters now within
  // theirs, rather than when a slot next frees.
  void SharesChanged() { GrantFreeSlots(); }

 private:
  struct Waiter {
    explicit Waiter(const boost::asio::any_io_executor& ex) : timer(ex) {}
    boost::asio::steady_timer timer;
    bool granted = false;
  };
  void Release(const std::string& client);
  void Take(const std::string& client);
  // Each free slot to the oldest waiter of the first client in turn that is under its share.
  void GrantFreeSlots();

  boost::asio::any_io_executor ex_;
  uint32_t limit_;
  std::chrono::steady_clock::duration queue_timeout_;
  ShareOf share_of_;
  uint32_t running_ = 0;
  size_t queued_ = 0;
  std::map<std::string, uint32_t> running_by_;                          // by client, never 0
  std::map<std::string, std::deque<std::shared_ptr<Waiter>>> waiting_;  // by client
  std::deque<std::string> turns_;  // the clients with waiters, the next one to serve first
};

}  // namespace ci::daemon
