// envd's process.Process service over a sandbox's ProcessTable (docs/e2b.md "Processes"):
// Start and Connect stream the process's events (Connect envelopes, keepalives while it is
// quiet); List, SendInput, CloseStdin and SendSignal are unary. A PTY is not offered.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/e2b/process_table.h"
#include "daemon/http/http_exchange.h"

namespace ci::daemon::e2b {

// The sandbox a request is for, as its processes see it.
struct ProcessContext {
  std::string sandbox;
  std::string client;
  std::vector<std::string> env;  // every process's environment before its own envs
  std::string home;              // the cwd of a process that names none; relative cwds start here
  uint64_t max_body_bytes = 0;
};

bool IsProcessRpc(std::string_view path);
bool IsStreamingProcessRpc(std::string_view path);

boost::asio::awaitable<void> HandleProcessRpc(HttpExchange& ex, const ProcessContext& context,
                                              ProcessTable& table);

}  // namespace ci::daemon::e2b
