// envd's filesystem.Filesystem service (docs/e2b.md "Files"): Stat, ListDir, MakeDir, Move and
// Remove are unary, WatchDir streams the directory's events (a start, then one message per
// event, keepalives while it is quiet) until the client leaves or its Connect-Timeout-Ms passes.
// Each call runs envd_files.py in the sandbox (file_helper.h).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string_view>

#include "daemon/e2b/file_helper.h"
#include "daemon/http/http_exchange.h"

namespace ci::daemon::e2b {

bool IsFilesystemRpc(std::string_view path);
bool IsStreamingFilesystemRpc(std::string_view path);

boost::asio::awaitable<void> HandleFilesystemRpc(HttpExchange& ex, const FileContext& context,
                                                 uint64_t max_body_bytes);

}  // namespace ci::daemon::e2b
