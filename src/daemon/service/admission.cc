#include "daemon/service/admission.h"

#include <algorithm>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace ci::daemon {

boost::asio::awaitable<std::optional<Admission::Permit>> Admission::Acquire(
    const std::string& client) {
  if (running_ < limit_ && queued_ == 0) {
    ++running_;
    co_return Permit(this);
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
  if (waiter->granted) co_return Permit(this);
  std::deque<std::shared_ptr<Waiter>>& left = waiting_[client];
  left.erase(std::find(left.begin(), left.end(), waiter));
  --queued_;
  if (left.empty()) {
    waiting_.erase(client);
    turns_.erase(std::find(turns_.begin(), turns_.end(), client));
  }
  co_return std::nullopt;
}

void Admission::Release() {
  if (queued_ == 0) {
    --running_;
    return;
  }
  // The slot passes straight to the oldest waiter of the client whose turn it is, so running_
  // is unchanged; that client goes to the back of the turns while it has more waiters.
  const std::string client = std::move(turns_.front());
  turns_.pop_front();
  std::deque<std::shared_ptr<Waiter>>& queue = waiting_[client];
  std::shared_ptr<Waiter> next = std::move(queue.front());
  queue.pop_front();
  --queued_;
  if (queue.empty()) {
    waiting_.erase(client);
  } else {
    turns_.push_back(client);
  }
  next->granted = true;
  next->timer.cancel();
}

}  // namespace ci::daemon
