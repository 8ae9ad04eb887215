#include "daemon/service/admission.h"

#include <algorithm>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace ci::daemon {

uint32_t Admission::running_of(const std::string& client) const {
  auto it = running_by_.find(client);
  return it == running_by_.end() ? 0 : it->second;
}

uint32_t Admission::share(const std::string& client) const {
  return share_of_ ? std::min(share_of_(client), limit_) : limit_;
}

Admission::Refusal Admission::WhyRefused(const std::string& client) const {
  const uint32_t mine = share(client);
  if (mine == 0) return Refusal::kForbidden;
  return !client.empty() && running_of(client) >= mine ? Refusal::kAtShare : Refusal::kFull;
}

std::string Admission::ExecutionRefusal(const std::string& client) const {
  const Refusal why = WhyRefused(client);
  if (why == Refusal::kForbidden) {
    return "API key '" + client + "' may not run executions (executions=0 on its line in " +
           "API_KEYS_FILE)";
  }
  if (why == Refusal::kAtShare) {
    return "API key '" + client + "' runs " + std::to_string(share(client)) +
           " executions, its share of this replica (executions= on its line in API_KEYS_FILE, "
           "else MAX_EXECUTIONS_PER_KEY); retry when one ends";
  }
  return "Execution capacity on this replica is saturated. Retry after the Retry-After delay.";
}

void Admission::Take(const std::string& client) {
  ++running_;
  ++running_by_[client];
}

boost::asio::awaitable<std::optional<Admission::Permit>> Admission::Acquire(
    const std::string& client) {
  const uint32_t own_share = share(client);
  if (own_share == 0) co_return std::nullopt;
  // A free slot means every waiter is held back by its share: this client passes them only
  // when it is under its own and has no waiter of its own to overtake.
  if (running_ < limit_ && running_of(client) < own_share && !waiting_.contains(client)) {
    Take(client);
    co_return Permit(this, client);
  }
  auto waiter = std::make_shared<Waiter>(ex_);
  std::deque<std::shared_ptr<Waiter>>& mine = waiting_[client];
  if (mine.empty()) turns_.push_back(client);
  mine.push_back(waiter);
  ++queued_;
  waiter->timer.expires_after(queue_timeout_);
  boost::system::error_code ec;
  co_await waiter->timer.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  // The flag, not the error code, decides: a slot handed over just as the timer fired counts.
  if (waiter->granted) co_return Permit(this, client);
  std::deque<std::shared_ptr<Waiter>>& left = waiting_[client];
  left.erase(std::find(left.begin(), left.end(), waiter));
  --queued_;
  if (left.empty()) {
    waiting_.erase(client);
    turns_.erase(std::find(turns_.begin(), turns_.end(), client));
  }
  co_return std::nullopt;
}

void Admission::Release(const std::string& client) {
  --running_;
  if (--running_by_[client] == 0) running_by_.erase(client);
  GrantFreeSlots();
}

void Admission::GrantFreeSlots() {
  while (running_ < limit_) {
    // The chosen client goes to the back of the turns while it has more waiters.
    auto next_client = std::find_if(turns_.begin(), turns_.end(), [this](const std::string& c) {
      return running_of(c) < share(c);
    });
    if (next_client == turns_.end()) return;
    const std::string chosen = std::move(*next_client);
    turns_.erase(next_client);
    std::deque<std::shared_ptr<Waiter>>& queue = waiting_[chosen];
    std::shared_ptr<Waiter> next = std::move(queue.front());
    queue.pop_front();
    --queued_;
    if (queue.empty()) {
      waiting_.erase(chosen);
    } else {
      turns_.push_back(chosen);
    }
    Take(chosen);
    next->granted = true;
    next->timer.cancel();
  }
}

}  // namespace ci::daemon
