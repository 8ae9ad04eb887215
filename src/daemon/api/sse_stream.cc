#include "daemon/api/sse_stream.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>

namespace ci::daemon {

asio::awaitable<bool> SseStream::Begin() {
  // Built before co_await: GCC 12 miscompiles braced string-literal temporaries in a co_await.
  HeaderList headers{{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
  Status began = co_await ex_.BeginStream(200, std::move(headers));
  if (!began.ok()) co_return false;
  auto executor = co_await asio::this_coro::executor;
  wake_.emplace(executor);
  drained_.emplace(executor);
  asio::co_spawn(executor, WriteFrames(), asio::detached);
  co_return true;
}

void SseStream::Push(std::string frame) {
  if (gone_) return;
  frames_.push_back(std::move(frame));
  wake_->Notify();
}

void SseStream::MarkGone() {
  if (gone_) return;
  gone_ = true;
  frames_.clear();
  if (on_gone_) on_gone_();
}

asio::awaitable<void> SseStream::WriteFrames() {
  for (;;) {
    while (!frames_.empty()) {
      std::string frame = std::move(frames_.front());
      frames_.pop_front();
      if (!(co_await ex_.WriteStream(std::move(frame))).ok()) MarkGone();
    }
    if (finished_) break;
    co_await wake_->Wait();
  }
  writer_done_ = true;
  drained_->Notify();
}

asio::awaitable<void> SseStream::Finish() {
  finished_ = true;
  wake_->Notify();
  while (!writer_done_) co_await drained_->Wait();
  if (!gone_) co_await ex_.EndStream();
}

}  // namespace ci::daemon
