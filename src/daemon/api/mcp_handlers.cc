// /mcp: the MCP server (daemon/mcp/mcp_server.h) on the daemon's HTTP, behind its API keys.
#include "daemon/api/handlers.h"

namespace ci::daemon {

asio::awaitable<void> ApiHandlers::Mcp(HttpExchange& ex, const std::string&) {
  std::string body;
  if (ex.head().method == "POST") {
    std::optional<std::string> read = co_await ReadJsonBody(ex);
    if (!read) co_return;
    body = std::move(*read);
  }
  const HttpRequestHead& head = ex.head();
  McpHttpRequest request{head.method,
                         body,
                         head.Header("mcp-session-id").value_or(""),
                         head.Header("accept").value_or(""),
                         head.Header("mcp-protocol-version").value_or(""),
                         ex.client};
  co_await service_.ProbedLanguages();  // tools/list declares the languages that run
  McpHttpResponse answer = co_await mcp_.Handle(request);
  HttpResponse response;
  response.status = answer.status;
  response.content_type = answer.content_type;
  response.body = std::move(answer.body);
  response.headers = std::move(answer.headers);
  co_await ex.Respond(std::move(response));
}

}  // namespace ci::daemon
