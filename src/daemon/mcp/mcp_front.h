// The MCP front: /mcp (POST, GET, DELETE) on the daemon's HTTP, behind its API keys, answered by
// the MCP server (mcp_server.h) over the sandbox tools.
#pragma once

#include <span>

#include "daemon/config/config.h"
#include "daemon/front/front.h"
#include "daemon/mcp/mcp_server.h"
#include "daemon/service/execution_service.h"

namespace ci::daemon {

class McpFront final : public Front {
 public:
  // `tools` and `service` must outlive the front.
  McpFront(const Config& config, ExecutionService& service, ToolSet& tools,
           McpServer::ShareOf share_of);

  bool Claims(const HttpRequestHead& head) const override;
  boost::asio::awaitable<void> Handle(HttpExchange& ex) override;
  void SetApiKeys(ApiKeys* keys) override { keys_ = keys; }

  // Every route it serves.
  static std::span<const RouteSpec> Routes();

 private:
  const Config& config_;
  ExecutionService& service_;
  McpServer mcp_;
  ApiKeys* keys_ = nullptr;
};

}  // namespace ci::daemon
