// Init's side of a session's persistent interpreter (RunPayload::serves_calls and ::call,
// src/runtime/README.md "Session sandboxes"). Init holds the only other end of the interpreter's
// socket (fd 3 of the interpreter, made by socketpair: no name anything else could connect to),
// hands it each call's request with the call's stdio attached (SCM_RIGHTS), and bounds the call
// from outside the interpreter: the daemon's kill at the call's timeout, and the CPU time of the
// whole sandbox during the call, measured here from /proc, against the spec's CPU limit. The CPU
// the sandbox uses while no call runs (a thread or process a cell left spinning) adds up over the
// server's life against the same limit, watched between runs too, so it cannot burn CPU unbounded.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "runtime/wire/messages.h"

namespace ci::runtime {

// The program serving calls, if one runs.
struct SessionInterpreter {
  pid_t pid = 0;  // its pid, also its session id (it is a background program); 0: none
  int fd = -1;    // init's end of its socket
  uint32_t cpu_limit_sec = 0;
  // Sandbox CPU (SandboxCpuMs) when the idle window began: the end of the previous call, moved on
  // by the CPU of each other run since (bash calls have their own RLIMIT_CPU).
  uint64_t window_start_ms = 0;
  // CPU the sandbox used while no call ran, over the server's whole life: past the CPU limit the
  // server is killed. Not charged to the next call alone: frequent calls would each reset it.
  uint64_t idle_ms = 0;
};

// CPU time in ms of every process the sandbox has had but init: user + system time of each live
// process and of the children it reaped (/proc/<pid>/stat), plus what init itself reaped. Never
// decreases (a process reaped between two reads of /proc is seen again in its parent next time).
uint64_t SandboxCpuMs();

// After a background program serving calls started (`background.back()`, init's end `fd`).
void SessionInterpreterStarted(SessionInterpreter* server, const std::vector<pid_t>& background,
                               int fd, uint32_t cpu_limit_sec);

// After every run: a call starts a new CPU window; any other run's own CPU (`run_cpu_ms`) is not
// charged to the server.
void RunEnded(SessionInterpreter* server, bool was_call, uint64_t run_cpu_ms);

// Waits until init's socket with the daemon is readable; meanwhile, every 250 ms, kills the
// server (and everything else but init) once its idle CPU exceeds the limit: the next call then
// finds no server and starts a new one, saying the state is lost.
void AwaitDaemonWatchingCpu(SessionInterpreter* server, std::vector<pid_t>* background);

// kRun with a call: sends it to the server, reports kStarted, waits for its answer, its death, a
// kill request on fd 4 or the CPU limit. Killing the server kills everything but init.
proto::Exited ServeCall(const proto::RunRequest& req, int signal_fd, SessionInterpreter* server,
                        std::vector<pid_t>* background, bool* daemon_gone);

}  // namespace ci::runtime
