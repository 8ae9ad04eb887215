// A Server-Sent Events answer whose frames the work queues and a coroutine of its own writes, so
// the work (a program's output, an agent's attempts) never waits on a slow client.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "daemon/http/http_exchange.h"
#include "daemon/service/async_event.h"

namespace ci::daemon {

class SseStream {
 public:
  explicit SseStream(HttpExchange& ex) : ex_(ex) {}
  SseStream(const SseStream&) = delete;
  SseStream& operator=(const SseStream&) = delete;

  // Sends the 200 head (no caching, no proxy buffering) and starts the writer; false when that
  // failed (the client is gone: nothing more to do).
  asio::awaitable<bool> Begin();
  // Queues a frame (sse.h SseFrame); dropped once the client is gone.
  void Push(std::string frame);
  // The client left (a write failed, or the caller saw it go): `on_gone` runs once.
  void MarkGone();
  void OnGone(std::function<void()> on_gone) { on_gone_ = std::move(on_gone); }
  bool gone() const { return gone_; }
  // Waits until every queued frame is written, then ends the response.
  asio::awaitable<void> Finish();

 private:
  asio::awaitable<void> WriteFrames();

  HttpExchange& ex_;
  std::deque<std::string> frames_;
  std::optional<AsyncEvent> wake_, drained_;
  bool finished_ = false, writer_done_ = false, gone_ = false;
  std::function<void()> on_gone_;
};

}  // namespace ci::daemon
