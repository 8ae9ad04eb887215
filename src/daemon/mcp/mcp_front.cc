#include "daemon/mcp/mcp_front.h"

#include "daemon/front/request_steps.h"

namespace ci::daemon {

McpFront::McpFront(const Config& config, ExecutionService& service, ToolSet& tools,
                   McpServer::ShareOf share_of)
    : config_(config),
      service_(service),
      mcp_(tools, CI_VERSION, config.max_mcp_sessions, std::move(share_of)) {}

std::span<const RouteSpec> McpFront::Routes() {
  static const RouteSpec kRoutes[] = {{"POST", "/mcp"}, {"GET", "/mcp"}, {"DELETE", "/mcp"}};
  return kRoutes;
}

bool McpFront::Claims(const HttpRequestHead& head) const { return head.path == "/mcp"; }

boost::asio::awaitable<void> McpFront::Handle(HttpExchange& ex) {
  const HttpRequestHead& head = ex.head();
  if (head.method != "POST" && head.method != "GET" && head.method != "DELETE") {
    co_return co_await ex.Respond(MethodNotAllowed("POST, GET, DELETE"));
  }
  if (!co_await Authenticate(keys_, ex)) co_return;
  std::string body;
  if (head.method == "POST") {
    std::optional<std::string> read = co_await ReadJsonBody(ex, config_.max_request_body_mb);
    if (!read) co_return;
    body = std::move(*read);
  }
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
