// The Model Context Protocol server behind /mcp: JSON-RPC 2.0 over the streamable HTTP transport
// (spec revision 2025-06-18), independent of the HTTP library. The daemon's handler hands it the
// request's method, headers and body and writes back the McpHttpResponse. Every POST is answered
// with one JSON object, never an SSE stream, and GET opens no stream (405): both are what the spec
// allows a server whose tools answer once.
#pragma once

#include <rapidjson/document.h>

#include <boost/asio/awaitable.hpp>
#include <cstddef>
#include <functional>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "daemon/tools/tool_set.h"

namespace ci::daemon {

// One HTTP request to /mcp. The views must outlive Handle()'s coroutine.
struct McpHttpRequest {
  std::string_view method;            // the HTTP method: POST, GET, DELETE, ...
  std::string_view body;              // POST: one JSON-RPC message
  std::string_view session_id;        // the Mcp-Session-Id header, "" if none
  std::string_view accept;            // the Accept header, "" if none
  std::string_view protocol_version;  // the MCP-Protocol-Version header, "" if none
  // Who asks: the API key's name ("" without keys). Passed to ToolSet::Call, and a session
  // answers only the client that opened it.
  std::string client;
};

struct McpHttpResponse {
  int status = 200;
  std::string content_type;  // "" when there is no body
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type
};

class McpServer {
 public:
  // The protocol revisions a client may ask for, newest first; any other is answered with the
  // newest (the client then decides whether it can go on).
  static constexpr std::string_view kProtocolVersions[] = {"2025-06-18", "2025-03-26",
                                                           "2024-11-05"};

  // How many sessions a client may keep (at least 1): opening one more ends its least recently
  // used. Empty: no share below max_sessions.
  using ShareOf = std::function<size_t(const std::string& client)>;
  // `tools` must outlive the server. At most `max_sessions` sessions are kept: opening one more
  // ends the least recently used of the client holding the most.
  McpServer(ToolSet& tools, std::string server_version, size_t max_sessions = 1000,
            ShareOf share_of = {});

  // The answer to one HTTP request. Runs on one thread at a time (the daemon's io_context);
  // other requests may be handled while a tool call is awaited.
  boost::asio::awaitable<McpHttpResponse> Handle(const McpHttpRequest& request);

  size_t session_count() const { return sessions_.size(); }

 private:
  // What the server remembers of a client between requests.
  struct Session {
    std::string id;                // the Mcp-Session-Id: 128 random bits in hex
    std::string protocol_version;  // the negotiated revision
    std::string client;            // the McpHttpRequest::client that opened it
  };
  // The result object of a request, as JSON text, or the JSON-RPC error that answers it.
  struct RpcError {
    int code;
    std::string message;
  };
  struct RpcAnswer {
    std::string result_json;  // set when there is no error
    std::optional<RpcError> error;
  };
  static RpcAnswer Failed(int code, std::string message);

  boost::asio::awaitable<McpHttpResponse> HandlePost(const McpHttpRequest& request);
  McpHttpResponse HandleDelete(const McpHttpRequest& request);
  McpHttpResponse Initialize(const std::string& id_json, const rapidjson::Value* params,
                             const std::string& client);
  RpcAnswer ListTools() const;
  // Copies what it needs before awaiting the tool: the session may end meanwhile.
  boost::asio::awaitable<RpcAnswer> CallTool(const rapidjson::Value* params,
                                             std::string protocol_version, std::string client);

  // The session `id` of `client`, marked as the most recently used; nullptr when there is none
  // (unknown, ended, evicted, or another client's).
  Session* FindSession(std::string_view id, const std::string& client);
  // A new session, evicting the client's least recently used one when it holds its share, else
  // that of the client holding the most when full; nullptr when the kernel gave no random bytes
  // for its id.
  Session* OpenSession(std::string protocol_version, const std::string& client);

  ToolSet& tools_;
  std::string server_version_;
  size_t max_sessions_;
  ShareOf share_of_;
  std::list<Session> sessions_;  // the most recently used first
  std::unordered_map<std::string, std::list<Session>::iterator> sessions_by_id_;
};

}  // namespace ci::daemon
