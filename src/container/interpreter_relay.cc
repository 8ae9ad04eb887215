#include "container/interpreter_relay.h"

#include <spdlog/spdlog.h>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "container/container_exec.h"
#include "container/sandbox_counters.h"
#include "core/sleep.h"

namespace ci::container {

using namespace std::chrono_literals;

asio::awaitable<void> PumpInterpreterRelay(std::shared_ptr<InterpreterRelay> s) {
  ExecOutputSink route = [s](ExecOutput k, std::string_view bytes) {
    if (k == ExecOutput::kSystemError) return;
    const int i = k == ExecOutput::kStderr ? 1 : 0;
    if (!s->started) {
      if (i == 0 && s->head.size() < 256) s->head.append(bytes);
      s->started = s->head_lines() >= 2;
      s->Notify();
      return;
    }
    std::string text = s->out[i].Feed(bytes);
    if (!text.empty() && s->sink) s->sink(i == 1 ? StreamKind::kStderr : StreamKind::kStdout, text);
    if (s->out[i].ended()) s->Notify();
  };
  Status pumped = co_await Pump(*s->stream, route);
  if (!pumped.ok()) spdlog::debug("session interpreter stream: {}", pumped.message());
  s->alive = false;
  s->Notify();
}

asio::awaitable<void> AwaitNews(InterpreterRelay& s, std::chrono::steady_clock::duration d) {
  if (!s.news) {
    s.event.expires_after(d);
    boost::system::error_code ec;
    co_await s.event.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  s.news = false;
}

asio::awaitable<void> WatchIdleCpu(std::shared_ptr<InterpreterRelay> s, HostCgroup host,
                                   pid_t init_pid, std::string id, uint64_t limit_ms) {
  while (s->alive) {
    co_await Sleep(1s);
    if (!s->alive || s->busy) continue;
    uint64_t cpu = HostCpuMs(host);
    uint64_t idle = s->idle_ms + (cpu > s->window_start_ms ? cpu - s->window_start_ms : 0);
    if (idle <= limit_ms) continue;
    spdlog::info("{}: the session's interpreter used {} ms of CPU between calls; killed",
                 id.substr(0, 12), idle);
    KillHostCgroupProcesses(host, init_pid, id);
    co_return;
  }
}

}  // namespace ci::container
