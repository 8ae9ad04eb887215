#include "daemon/mcp/mcp_server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <map>

#include "core/header_text.h"
#include "core/json.h"
#include "core/random.h"
#include "core/short_id.h"

namespace ci::daemon {
namespace {

// JSON-RPC 2.0's codes, and the two that the MCP SDKs use for the transport's own refusals.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;
constexpr int kTransportError = -32000;
constexpr int kSessionNotFound = -32001;

constexpr std::string_view kNullId = "null";
constexpr size_t kSessionIdBytes = 16;
// structuredContent is in the CallToolResult of this revision on; older clients do not know it.
constexpr std::string_view kStructuredContentSince = "2025-06-18";
constexpr std::string_view kInstructions =
    "execute_code runs a program (Python, bash, JavaScript or Go) in a throw-away sandbox and "
    "returns its output, exit status and verdict; solve_task, when this server offers it, has a "
    "model write and run code until a task is solved.";

std::string ValueJson(const rapidjson::Value& v) {
  return JsonText([&](JsonWriter& w) { v.Accept(w); });
}

std::string ErrorJson(std::string_view id_json, int code, std::string_view message) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "jsonrpc", "2.0");
    w.Key("id");
    w.RawValue(id_json.data(), id_json.size(), rapidjson::kObjectType);
    w.Key("error");
    w.StartObject();
    w.Key("code");
    w.Int(code);
    WriteField(w, "message", message);
    w.EndObject();
    w.EndObject();
  });
}

std::string ResultJson(std::string_view id_json, std::string_view result_json) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "jsonrpc", "2.0");
    w.Key("id");
    w.RawValue(id_json.data(), id_json.size(), rapidjson::kObjectType);
    w.Key("result");
    w.RawValue(result_json.data(), result_json.size(), rapidjson::kObjectType);
    w.EndObject();
  });
}

McpHttpResponse JsonAnswer(int status, std::string body) {
  McpHttpResponse answer;
  answer.status = status;
  answer.content_type = "application/json";
  answer.body = std::move(body);
  return answer;
}

McpHttpResponse EmptyAnswer(int status) {
  McpHttpResponse answer;
  answer.status = status;
  return answer;
}

McpHttpResponse ErrorAnswer(int status, std::string_view id_json, int code,
                            std::string_view message) {
  return JsonAnswer(status, ErrorJson(id_json, code, message));
}

// Lenient, so that curl and hand-written clients work: only an Accept header that lists media
// ranges none of which covers application/json is refused.
bool AcceptsJson(std::string_view accept) {
  if (TrimHeaderSpace(accept).empty()) return true;
  while (!accept.empty()) {
    size_t comma = accept.find(',');
    std::string_view range = accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view() : accept.substr(comma + 1);
    range = TrimHeaderSpace(range.substr(0, range.find(';')));
    if (EqualsIgnoringCase(range, "application/json") ||
        EqualsIgnoringCase(range, "application/*") || range == "*/*") {
      return true;
    }
  }
  return false;
}

bool IsSupportedVersion(std::string_view version) {
  return std::find(std::begin(McpServer::kProtocolVersions), std::end(McpServer::kProtocolVersions),
                   version) != std::end(McpServer::kProtocolVersions);
}

std::string SupportedVersionsText() {
  std::string out;
  for (std::string_view v : McpServer::kProtocolVersions) {
    if (!out.empty()) out += ", ";
    out += v;
  }
  return out;
}

// MCP's ids are strings or integers, never null (unlike plain JSON-RPC).
bool IsValidId(const rapidjson::Value& id) {
  return id.IsString() || id.IsInt64() || id.IsUint64();
}

}  // namespace

McpServer::McpServer(ToolSet& tools, std::string server_version, size_t max_sessions,
                     ShareOf share_of)
    : tools_(tools),
      server_version_(std::move(server_version)),
      max_sessions_(std::max<size_t>(max_sessions, 1)),
      share_of_(std::move(share_of)) {}

boost::asio::awaitable<McpHttpResponse> McpServer::Handle(const McpHttpRequest& request) {
  if (request.method == "POST") co_return co_await HandlePost(request);
  if (request.method == "DELETE") co_return HandleDelete(request);
  McpHttpResponse refused = ErrorAnswer(
      405, kNullId, kTransportError,
      fmt::format("Method Not Allowed: /mcp answers POST (one JSON-RPC message) and DELETE (end "
                  "a session), not {}; this server opens no SSE stream",
                  request.method));
  refused.headers.emplace_back("Allow", "POST, DELETE");
  co_return refused;
}

boost::asio::awaitable<McpHttpResponse> McpServer::HandlePost(const McpHttpRequest& request) {
  if (!AcceptsJson(request.accept)) {
    co_return ErrorAnswer(406, kNullId, kTransportError,
                          fmt::format("Not Acceptable: the answer is application/json, which the "
                                      "Accept header '{}' does not allow",
                                      request.accept));
  }
  rapidjson::Document message;
  std::string why;
  if (!ParseJson(request.body, message, why)) {
    co_return ErrorAnswer(400, kNullId, kParseError, "Parse error: " + why);
  }
  if (message.IsArray()) {
    co_return ErrorAnswer(400, kNullId, kInvalidRequest,
                          "Invalid Request: batches are not supported (MCP 2025-06-18 removed "
                          "JSON-RPC batching): send one message per request");
  }
  if (!message.IsObject()) {
    co_return ErrorAnswer(400, kNullId, kInvalidRequest,
                          "Invalid Request: a JSON-RPC message is an object");
  }
  const rapidjson::Value* id = message.HasMember("id") ? &message["id"] : nullptr;
  std::string id_json = id && IsValidId(*id) ? ValueJson(*id) : std::string(kNullId);
  if (!message.HasMember("jsonrpc") || !message["jsonrpc"].IsString() ||
      std::string_view(message["jsonrpc"].GetString()) != "2.0") {
    co_return ErrorAnswer(400, id_json, kInvalidRequest,
                          "Invalid Request: \"jsonrpc\" must be \"2.0\"");
  }
  bool has_method = message.HasMember("method");
  bool is_response =
      !has_method && id && (message.HasMember("result") || message.HasMember("error"));
  if (has_method && !message["method"].IsString()) {
    co_return ErrorAnswer(400, id_json, kInvalidRequest,
                          "Invalid Request: \"method\" must be a string");
  }
  if (!has_method && !is_response) {
    co_return ErrorAnswer(400, id_json, kInvalidRequest,
                          "Invalid Request: neither a request nor a notification (\"method\") nor "
                          "a response (\"id\" with \"result\" or \"error\")");
  }
  if (id && !IsValidId(*id)) {
    co_return ErrorAnswer(400, kNullId, kInvalidRequest,
                          "Invalid Request: \"id\" must be a string or an integer");
  }
  bool is_request = has_method && id;
  std::string method = has_method ? message["method"].GetString() : std::string();
  const rapidjson::Value* params = message.HasMember("params") ? &message["params"] : nullptr;
  if (is_request && params && !params->IsObject()) {
    co_return JsonAnswer(
        200, ErrorJson(id_json, kInvalidParams,
                       fmt::format("Invalid params: the params of {} must be an object", method)));
  }
  if (is_request && method == "initialize") {
    co_return Initialize(id_json, params, request.client);
  }

  if (request.session_id.empty()) {
    co_return ErrorAnswer(400, id_json, kTransportError,
                          "Bad Request: no Mcp-Session-Id header; send initialize first and "
                          "then the session id it answered with every request");
  }
  Session* session = FindSession(request.session_id, request.client);
  if (!session) {
    co_return ErrorAnswer(404, id_json, kSessionNotFound,
                          "Session not found: it ended, was never opened, or belongs to "
                          "another client; send initialize to open a new one");
  }
  if (!request.protocol_version.empty() && !IsSupportedVersion(request.protocol_version)) {
    co_return ErrorAnswer(
        400, id_json, kTransportError,
        fmt::format("Bad Request: unsupported MCP-Protocol-Version header '{}'; supported: {}",
                    request.protocol_version, SupportedVersionsText()));
  }
  // Notifications (notifications/initialized, notifications/cancelled, ...) and the client's
  // responses need no answer; this server sends no requests of its own to be answered.
  if (!is_request) co_return EmptyAnswer(202);

  RpcAnswer answer;
  if (method == "ping") {
    answer.result_json = "{}";
  } else if (method == "tools/list") {
    answer = ListTools();
  } else if (method == "tools/call") {
    answer = co_await CallTool(params, session->protocol_version, request.client);
  } else {
    answer = Failed(kMethodNotFound, fmt::format("Method not found: '{}' (this server "
                                                 "offers initialize, ping, tools/list "
                                                 "and tools/call)",
                                                 method));
  }
  co_return JsonAnswer(200, answer.error
                                ? ErrorJson(id_json, answer.error->code, answer.error->message)
                                : ResultJson(id_json, answer.result_json));
}

McpHttpResponse McpServer::HandleDelete(const McpHttpRequest& request) {
  if (request.session_id.empty()) {
    return ErrorAnswer(400, kNullId, kTransportError,
                       "Bad Request: DELETE ends the session named by the Mcp-Session-Id "
                       "header, and there is none");
  }
  Session* session = FindSession(request.session_id, request.client);
  if (!session) {
    return ErrorAnswer(404, kNullId, kSessionNotFound,
                       "Session not found: it ended, was never opened, or belongs to another "
                       "client");
  }
  spdlog::info("MCP session {} ended by its client", ShortId(session->id));
  auto it = sessions_by_id_.find(session->id);
  sessions_.erase(it->second);
  sessions_by_id_.erase(it);
  return EmptyAnswer(200);
}

McpHttpResponse McpServer::Initialize(const std::string& id_json, const rapidjson::Value* params,
                                      const std::string& client) {
  if (!params || !params->HasMember("protocolVersion") ||
      !(*params)["protocolVersion"].IsString()) {
    return JsonAnswer(200, ErrorJson(id_json, kInvalidParams,
                                     "Invalid params: initialize needs params.protocolVersion, "
                                     "a string such as \"2025-06-18\""));
  }
  std::string asked = (*params)["protocolVersion"].GetString();
  std::string version =
      IsSupportedVersion(asked) ? asked : std::string(McpServer::kProtocolVersions[0]);
  Session* session = OpenSession(version, client);
  if (!session) {
    return ErrorAnswer(500, id_json, kInternalError,
                       "Internal error: no random bytes for a session id (getrandom failed)");
  }
  std::string result = JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "protocolVersion", version);
    w.Key("capabilities");
    w.StartObject();
    w.Key("tools");
    w.StartObject();
    w.Key("listChanged");
    w.Bool(false);
    w.EndObject();
    w.EndObject();
    w.Key("serverInfo");
    w.StartObject();
    WriteField(w, "name", "code-interpreter");
    WriteField(w, "version", server_version_);
    w.EndObject();
    WriteField(w, "instructions", kInstructions);
    w.EndObject();
  });
  McpHttpResponse answer = JsonAnswer(200, ResultJson(id_json, result));
  answer.headers.emplace_back("Mcp-Session-Id", session->id);
  return answer;
}

McpServer::RpcAnswer McpServer::ListTools() const {
  RpcAnswer answer;
  std::string failure;
  answer.result_json = JsonText([&](JsonWriter& w) {
    w.StartObject();
    w.Key("tools");
    w.StartArray();
    for (const llm::ToolDeclaration& tool : tools_.Declarations()) {
      rapidjson::Document schema;
      std::string why;
      if (!ParseJson(tool.parameters_json, schema, why) || !schema.IsObject()) {
        failure = fmt::format(
            "Internal error: the input schema of tool '{}' is not a JSON "
            "object{}",
            tool.name, why.empty() ? "" : ": " + why);
        continue;
      }
      w.StartObject();
      WriteField(w, "name", tool.name);
      WriteField(w, "description", tool.description);
      w.Key("inputSchema");
      schema.Accept(w);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  });
  if (!failure.empty()) {
    spdlog::error("MCP tools/list: {}", failure);
    answer.error = RpcError{kInternalError, failure};
  }
  return answer;
}

boost::asio::awaitable<McpServer::RpcAnswer> McpServer::CallTool(const rapidjson::Value* params,
                                                                 std::string protocol_version,
                                                                 std::string client) {
  if (!params || !params->HasMember("name") || !(*params)["name"].IsString()) {
    co_return Failed(kInvalidParams,
                     "Invalid params: tools/call needs "
                     "params.name, the tool's name");
  }
  std::string name = (*params)["name"].GetString();
  std::string arguments = "{}";
  if (params->HasMember("arguments")) {
    const rapidjson::Value& given = (*params)["arguments"];
    if (!given.IsObject()) {
      co_return Failed(kInvalidParams, fmt::format("Invalid params: the arguments of tool "
                                                   "'{}' must be an object",
                                                   name));
    }
    arguments = ValueJson(given);
  }
  std::vector<llm::ToolDeclaration> declarations = tools_.Declarations();
  bool known = std::any_of(declarations.begin(), declarations.end(),
                           [&](const llm::ToolDeclaration& d) { return d.name == name; });
  if (!known) {
    std::string offered;
    for (const llm::ToolDeclaration& d : declarations) {
      offered += (offered.empty() ? "" : ", ") + d.name;
    }
    co_return Failed(kInvalidParams,
                     fmt::format("Unknown tool: '{}' (this server offers: {})", name, offered));
  }

  ToolOutcome outcome;
  try {
    outcome = co_await tools_.Call(name, arguments, client);
  } catch (const std::exception& e) {
    spdlog::error("MCP tools/call {} failed: {}", name, e.what());
    co_return Failed(kInternalError,
                     fmt::format("Internal error: tool '{}' failed: {}", name, e.what()));
  }

  rapidjson::Document structured;
  bool with_structured = false;
  if (!outcome.is_error && protocol_version >= kStructuredContentSince) {
    std::string why;
    with_structured = ParseJson(outcome.result_json, structured, why) && structured.IsObject();
    if (!with_structured) {
      spdlog::error(
          "MCP tools/call {}: its result is not a JSON object ({}); answered without "
          "structuredContent",
          name, why.empty() ? "another JSON type" : why);
    }
  }
  RpcAnswer answer;
  answer.result_json = JsonText([&](JsonWriter& w) {
    w.StartObject();
    w.Key("content");
    w.StartArray();
    w.StartObject();
    WriteField(w, "type", "text");
    WriteField(w, "text", outcome.text);
    w.EndObject();
    for (const auto& image : outcome.images) {
      w.StartObject();
      WriteField(w, "type", "image");
      WriteField(w, "data", image.base64);
      WriteField(w, "mimeType", image.mime_type);
      w.EndObject();
    }
    w.EndArray();
    if (with_structured) {
      w.Key("structuredContent");
      structured.Accept(w);
    }
    w.Key("isError");
    w.Bool(outcome.is_error);
    w.EndObject();
  });
  co_return answer;
}

McpServer::RpcAnswer McpServer::Failed(int code, std::string message) {
  RpcAnswer answer;
  answer.error = RpcError{code, std::move(message)};
  return answer;
}

McpServer::Session* McpServer::FindSession(std::string_view id, const std::string& client) {
  auto it = sessions_by_id_.find(std::string(id));
  if (it == sessions_by_id_.end() || it->second->client != client) return nullptr;
  sessions_.splice(sessions_.begin(), sessions_, it->second);
  return &*it->second;
}

McpServer::Session* McpServer::OpenSession(std::string protocol_version,
                                           const std::string& client) {
  std::string id = RandomHex(kSessionIdBytes);
  if (id.empty()) return nullptr;
  std::map<std::string_view, size_t> held;
  for (const Session& s : sessions_) ++held[s.client];
  const size_t share = share_of_ ? std::max<size_t>(share_of_(client), 1) : max_sessions_;
  // A client at its share evicts its own least recently used session; a full table, that of
  // the client holding the most: one that opens sessions without end never evicts another's
  // while it holds more (issue #30 item 6).
  std::optional<std::string_view> evict_from;
  if (held[client] >= share) {
    evict_from = client;
  } else if (sessions_.size() >= max_sessions_) {
    evict_from = std::max_element(held.begin(), held.end(), [](const auto& a, const auto& b) {
                   return a.second < b.second;
                 })->first;
  }
  if (evict_from) {
    auto victim = std::find_if(sessions_.rbegin(), sessions_.rend(),
                               [&](const Session& s) { return s.client == *evict_from; });
    spdlog::info("MCP session {} evicted: {} sessions are open, {} of them of client '{}'",
                 ShortId(victim->id), sessions_.size(), held[*evict_from], *evict_from);
    sessions_by_id_.erase(victim->id);
    sessions_.erase(std::next(victim).base());
  }
  sessions_.push_front(
      Session{.id = id, .protocol_version = std::move(protocol_version), .client = client});
  sessions_by_id_.emplace(std::move(id), sessions_.begin());
  spdlog::info("MCP session {} opened (protocol {}){}", ShortId(sessions_.front().id),
               sessions_.front().protocol_version, client.empty() ? "" : " by " + client);
  return &sessions_.front();
}

}  // namespace ci::daemon
