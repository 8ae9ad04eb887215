// A session's persistent interpreter (python_session.h), reached through this daemon's relay: an
// exec whose stdin and output only the daemon holds, running while the interpreter serves it. A
// detached pump reads the relay's two handshake lines, then routes its output to the call in
// flight (CallOutput splits it at the call's end marker) and drops the rest; a detached watch
// kills the interpreter when its idle CPU passes the limit. README "Sessions".
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "container/call_output.h"
#include "container/cgroup_probe.h"
#include "container/container_api.h"
#include "core/executor.h"

namespace ci::container {

struct InterpreterRelay {
  explicit InterpreterRelay(const asio::any_io_executor& ex) : event(ex) {}
  std::shared_ptr<ExecStream> stream;
  long pid = 0;       // the interpreter's pid in the sandbox
  bool alive = true;  // the relay's stream is open
  // The relay's handshake (python_session.cc): `ready`, then `new PID`, `attached PID` or `none`.
  std::string head;
  bool started = false;  // both lines are in `head`
  size_t head_lines() const {
    return static_cast<size_t>(std::count(head.begin(), head.end(), '\n'));
  }
  CallOutput out[2];  // stdout, stderr
  OutputSink sink;    // the call in flight's; empty between calls
  asio::steady_timer event;
  // Idle CPU (python_session.h): the CPU of the container's processes while no run is active
  // (SandboxCounters::processes_cpu_ms) adds up over the server's life against the CPU limit.
  bool busy = false;  // a run of the sandbox is active
  uint64_t window_start_ms = 0;
  uint64_t idle_ms = 0;
  // News (output, the end of a call, death) wakes AwaitNews; news that came while nobody waited
  // is kept, so a waiter that was busy meanwhile (a counters probe exec) does not sleep through it.
  bool news = false;
  void Notify() {
    news = true;
    event.cancel();
  }
};

// Reads the relay's stream to its end: the handshake first, then each call's output to `sink`.
asio::awaitable<void> PumpInterpreterRelay(std::shared_ptr<InterpreterRelay> s);

// Waits for news of the server (or `d`, whichever first).
asio::awaitable<void> AwaitNews(InterpreterRelay& s, std::chrono::steady_clock::duration d);

// Between runs, once a second: kills everything but PID 1 (the interpreter too) once the
// container's idle CPU exceeds the limit. From the host only (a file read, and a kill with no
// exec that could race a run starting); through a remote Engine the next call checks instead.
asio::awaitable<void> WatchIdleCpu(std::shared_ptr<InterpreterRelay> s, HostCgroup host,
                                   pid_t init_pid, std::string id, uint64_t limit_ms);

}  // namespace ci::container
