// Socket activation (systemd's LISTEN_FDS protocol, without libsystemd): a manager that already
// listens on the port passes the socket as fd 3 and names this process in LISTEN_PID, so the
// daemon accepts on it instead of binding HOST:PORT (packaging/code-interpreter.socket).
#pragma once

#include <sys/types.h>

#include <functional>

#include "core/status.h"

namespace ci::daemon {

constexpr int kListenFdsStart = 3;  // the first passed fd, fixed by the protocol

using EnvLookup = std::function<const char*(const char*)>;

// The passed listening socket, or -1 when none was passed to process `self` (LISTEN_PID unset or
// another process's: the variables were inherited, not meant for us). An error when they are meant
// for us but do not pass exactly one listening TCP socket. The fd is made close-on-exec, so no
// sandbox or child inherits it. `first_fd` is kListenFdsStart except in tests.
Result<int> ListenFdFromEnv(const EnvLookup& env, pid_t self, int first_fd = kListenFdsStart);

// ListenFdFromEnv on this process's environment, then unsets LISTEN_PID, LISTEN_FDS and
// LISTEN_FDNAMES so that nothing the daemon starts sees them.
Result<int> TakeSystemdListenFd();

}  // namespace ci::daemon
