// Readiness and status for systemd (Type=notify units) over $NOTIFY_SOCKET, without libsystemd:
// one datagram of newline-separated VAR=value lines to an AF_UNIX socket ("READY=1",
// "STATUS=...", "STOPPING=1"). A path starting with '@' names an abstract socket.
//
// The daemon sends READY=1 once it listens and its startup self-test has run (so a unit that
// `systemctl start` returned for answers requests with its languages known), STATUS= lines on the
// way, and STOPPING=1 when a signal starts the shutdown.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace ci::daemon {

// Sends `state` to the socket named by `socket_path` (NOTIFY_SOCKET's value). Nothing to do, and
// ok, when it is null or empty: the daemon was not started by systemd as a notify service.
Status SystemdNotifyTo(const char* socket_path, std::string_view state);

// The same to $NOTIFY_SOCKET; a failure is logged once as a warning (the service still runs).
void SystemdNotify(std::string_view state);

// READY=1 with a STATUS= line.
void SystemdReady(std::string_view status);

// "STATUS=<text>" with newlines in `text` replaced (a newline would start another variable).
std::string SystemdStatusLine(std::string_view text);

}  // namespace ci::daemon
