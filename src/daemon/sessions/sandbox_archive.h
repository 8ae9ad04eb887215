// A session sandbox's writable trees (/workspace, /tmp, /home/user) as one tar, made by `tar`
// inside the sandbox and unpacked by `tar` inside another (modes, links, holes and sizes kept):
// the daemon only moves the bytes, so nothing of a snapshot is read or unpacked outside a
// sandbox.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>
#include <vector>

#include "core/executor.h"
#include "daemon/sessions/session_snapshots.h"

namespace ci::daemon {

// Streams the tar into `out`. What will not come back with it goes to `lost`: the sandbox's
// other processes ("process 12: sleep 100") and what tar left out (sockets). An error names why
// there is no tar (too large for `out`, tar failed).
asio::awaitable<Status> PackSandbox(Sandbox& sandbox, SnapshotStore::Writer& out,
                                    std::vector<std::string>* lost);

// Unpacks the tar at `host_path` (the daemon's) into the sandbox. Files already there stay (those
// staged into it first: a request's, the egress CA).
asio::awaitable<Status> UnpackSandbox(Sandbox& sandbox, const std::string& host_path);

}  // namespace ci::daemon
