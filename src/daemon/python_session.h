// The persistent Python interpreter of a session (api.md "Sessions" [ext]). A server started as
// the session's background program keeps one namespace across calls; each call runs a small
// client that hands the server its stdin/stdout/stderr (SCM_RIGHTS over an abstract unix socket
// of the sandbox's network namespace) and the request, and exits with the cell's status. Output
// therefore flows from the interpreter straight into the run's pipes, subprocesses included, on
// every backend alike.
#pragma once

#include <csignal>
#include <string>
#include <string_view>
#include <vector>

namespace ci {

// argv of the server (a RunPayload::background program).
std::vector<std::string> PythonSessionServerArgv();

// argv of one call's client; `wait_for_server` right after starting the server (it may not be
// listening yet).
std::vector<std::string> PythonSessionClientArgv(bool wait_for_server);

// The client's stdin: the framed request, then the user's stdin.
std::string PythonSessionClientStdin(std::string_view code, bool last_line_interactive,
                                     int64_t timeout_ms, uint32_t cpu_time_sec,
                                     std::string_view user_stdin);

// The client kills itself with this signal when no interpreter answered (none running, or it died
// before taking the call): the call did not run and may be retried on a new interpreter.
constexpr int kNoInterpreterSignal = SIGUSR2;

// Told on stderr when a call lands on a new interpreter after the previous one ended.
constexpr std::string_view kStateLostNotice =
    "[code-interpreter] This session's Python interpreter had stopped (killed after a timeout, "
    "out of memory, or it exited), so a new one was started: variables, imports and definitions "
    "from earlier calls are gone. Files in /workspace and /tmp are kept.\n";

// The Python sources (exposed for tests).
std::string_view PythonSessionServerSource();
std::string_view PythonSessionClientSource();

}  // namespace ci
