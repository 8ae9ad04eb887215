// The persistent Python interpreter of a session (api.md "Sessions" [ext]). A server started as
// the session's background program (RunPayload::serves_calls) keeps one namespace across calls;
// each call is a RunPayload::call carrying PythonSessionRequest. The server's only channel is one
// the runtime gave it (local: a socket whose other end init holds, the call's stdio passed over
// it) or one that proved the sandbox's token (docker and kubernetes: the daemon's relay exec,
// python_session.cc), and it makes itself non-dumpable: no process of the sandbox, a session's
// bash call included, can drive it.
//
// Limits are enforced from outside the interpreter, by the runtime: at the call's timeout the
// interpreter's own SIGALRM interrupts the cell (timed out, state kept); kSessionCallGrace later
// the runtime kills it and everything else in the sandbox (state lost). The sandbox's CPU time
// since the previous call ended is held against the CPU limit during the call (then the same
// kill, verdict cpu_limit) and between calls (a thread a cell left spinning: the interpreter is
// killed, the next call says the state is lost). An OOM kill is memory_limit.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace ci::daemon {

// argv of the server (a RunPayload::background program that serves calls).
std::vector<std::string> PythonSessionServerArgv();

// RunPayload::call of one cell (the call's stdin is RunPayload::stdin_data). A call may instead
// save or restore the namespace (python_state.h).
std::string PythonSessionRequest(std::string_view code, bool last_line_interactive,
                                 int64_t timeout_ms);

// How long after its timeout a call's interpreter is killed when the interrupt did not end it.
constexpr std::chrono::milliseconds kSessionCallGrace{2000};

// Told on stderr when a call lands on a new interpreter after the previous one ended.
constexpr std::string_view kStateLostNotice =
    "[code-interpreter] This session's Python interpreter had stopped (killed after a timeout, "
    "for its CPU or memory limit, for using CPU between calls, or it exited), so a new one was "
    "started: variables, imports and definitions from earlier calls are gone. Files in "
    "/workspace and /tmp are kept.\n";

// The Python source (exposed for tests).
std::string_view PythonSessionServerSource();

}  // namespace ci::daemon
