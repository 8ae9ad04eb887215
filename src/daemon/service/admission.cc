#include "daemon/service/admission.h"

#include <algorithm>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace ci::daemon {

boost::asio::awaitable<std::optional<Admission::Permit>> Admission::Acquire() {
  if (running_ < limit_ && queue_.empty()) {
    ++running_;
    co_return Permit(this);
  }
  auto waiter = std::make_shared<Waiter>(ex_);
  queue_.push_back(waiter);
  waiter->timer.expires_after(queue_timeout_);
  boost::system::error_code ec;
  co_await waiter->timer.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  // The flag, not the error code, decides: a slot handed over just as the timer fired counts.
  if (waiter->granted) co_return Permit(this);
  queue_.erase(std::find(queue_.begin(), queue_.end(), waiter));
  co_return std::nullopt;
}

void Admission::Release() {
  if (queue_.empty()) {
    --running_;
    return;
  }
  // The slot passes straight to the oldest waiter (FIFO), so running_ is unchanged.
  auto next = queue_.front();
  queue_.pop_front();
  next->granted = true;
  next->timer.cancel();
}

}  // namespace ci::daemon
