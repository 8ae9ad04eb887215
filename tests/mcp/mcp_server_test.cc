// McpServer against a fake ToolSet: the streamable HTTP transport's statuses and headers, the
// JSON-RPC messages, sessions, and what reaches the tools.
#include "daemon/mcp/mcp_server.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/await.h"
#include "core/json.h"

namespace ci::daemon {
namespace {

namespace asio = boost::asio;

constexpr char kExecuteSchema[] =
    R"({"type":"object","properties":{"code":{"type":"string"}},"required":["code"]})";

// Records every call and answers with the outcome set for the tool's name.
class FakeToolSet : public ToolSet {
 public:
  struct RecordedCall {
    std::string name, arguments_json, client;
  };

  std::vector<llm::ToolDeclaration> Declarations() const override { return declarations; }

  asio::awaitable<ToolOutcome> Call(const std::string& name, const std::string& arguments_json,
                                    const std::string& client) override {
    calls.push_back({name, arguments_json, client});
    // A real tool suspends; so does this one, so that Handle is driven through the io_context.
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
    if (gate) {
      boost::system::error_code cancelled;
      co_await gate->async_wait(asio::redirect_error(asio::use_awaitable, cancelled));
    }
    if (throws) throw std::runtime_error("the sandbox is gone");
    co_return outcomes[name];
  }

  std::vector<llm::ToolDeclaration> declarations = {
      {"execute_code", "Runs a program.", kExecuteSchema},
      {"solve_task", "Solves a task.", R"({"type":"object","properties":{}})"}};
  std::map<std::string, ToolOutcome> outcomes;
  std::vector<RecordedCall> calls;
  bool throws = false;
  // When set, a call waits until the test cancels it: a call in flight.
  std::unique_ptr<asio::steady_timer> gate;
};

class McpServerTest : public ::testing::Test {
 protected:
  // One HTTP request; `session` and the other headers as the client sent them.
  McpHttpResponse Send(std::string_view method, std::string_view body, std::string_view session,
                       std::string client = "", std::string_view accept = "",
                       std::string_view protocol_version = "") {
    McpHttpRequest request{.method = method,
                           .body = body,
                           .session_id = session,
                           .accept = accept,
                           .protocol_version = protocol_version,
                           .client = std::move(client)};
    return testing_support::AwaitOn(io_, server_.Handle(request));
  }

  McpHttpResponse Post(std::string_view body, std::string_view session) {
    return Send("POST", body, session);
  }

  // The JSON-RPC message of a request with `method` and `params` (an object's text, or "").
  static std::string Request(std::string_view method, std::string_view params = "",
                             std::string_view id = "1") {
    std::string out = R"({"jsonrpc":"2.0","id":)" + std::string(id) + R"(,"method":")" +
                      std::string(method) + '"';
    if (!params.empty()) out += R"(,"params":)" + std::string(params);
    return out + "}";
  }

  static std::string InitializeRequest(std::string_view version = "2025-06-18") {
    return Request("initialize", R"({"protocolVersion":")" + std::string(version) +
                                     R"(","capabilities":{},"clientInfo":{"name":"test",)"
                                     R"("version":"1"}})");
  }

  static std::string Header(const McpHttpResponse& r, std::string_view name) {
    for (const auto& [k, v] : r.headers) {
      if (k == name) return v;
    }
    return "";
  }

  // A new session's id (asserting the initialize succeeded).
  std::string Open(std::string client = "", std::string_view version = "2025-06-18") {
    McpHttpResponse r = Send("POST", InitializeRequest(version), "", std::move(client));
    EXPECT_EQ(r.status, 200) << r.body;
    std::string id = Header(r, "Mcp-Session-Id");
    EXPECT_FALSE(id.empty()) << "no Mcp-Session-Id header";
    return id;
  }

  static rapidjson::Document Json(const McpHttpResponse& r) {
    rapidjson::Document d;
    std::string why;
    EXPECT_TRUE(ParseJson(r.body, d, why)) << why << ": " << r.body;
    return d;
  }

  static std::string Text(const rapidjson::Value& v) {
    return JsonText([&](JsonWriter& w) { v.Accept(w); });
  }

  // The JSON-RPC result of a 200 application/json answer with id `id`.
  static rapidjson::Document Result(const McpHttpResponse& r, std::string_view id = "1") {
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.content_type, "application/json");
    rapidjson::Document d = Json(r);
    EXPECT_TRUE(d.IsObject() && d.HasMember("result")) << r.body;
    if (!d.IsObject() || !d.HasMember("result")) return rapidjson::Document();
    EXPECT_EQ(std::string(d["jsonrpc"].GetString()), "2.0");
    EXPECT_EQ(Text(d["id"]), id);
    rapidjson::Document result;
    result.CopyFrom(d["result"], result.GetAllocator());
    return result;
  }

  // Asserts a JSON-RPC error of `code` with `id` (JSON text); returns its message.
  static std::string Error(const McpHttpResponse& r, int code, std::string_view id = "1") {
    EXPECT_EQ(r.content_type, "application/json");
    rapidjson::Document d = Json(r);
    if (!d.IsObject() || !d.HasMember("error")) {
      ADD_FAILURE() << "not a JSON-RPC error: " << r.body;
      return "";
    }
    EXPECT_EQ(std::string(d["jsonrpc"].GetString()), "2.0");
    EXPECT_FALSE(d.HasMember("result"));
    EXPECT_EQ(Text(d["id"]), id);
    EXPECT_EQ(d["error"]["code"].GetInt(), code) << r.body;
    return d["error"]["message"].GetString();
  }

  asio::io_context io_;
  FakeToolSet tools_;
  // Keeps 3 sessions; carol's share is 2 of them.
  McpServer server_{tools_, "9.8.7", 3,
                    [](const std::string& client) -> size_t { return client == "carol" ? 2 : 3; }};
};

// --- initialize and sessions ------------------------------------------------------------------

TEST_F(McpServerTest, InitializeOpensASessionAndDescribesTheServer) {
  McpHttpResponse r = Post(InitializeRequest(), "");
  rapidjson::Document result = Result(r);
  std::string id = Header(r, "Mcp-Session-Id");
  EXPECT_EQ(id.size(), 32u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  EXPECT_EQ(std::string(result["protocolVersion"].GetString()), "2025-06-18");
  EXPECT_EQ(Text(result["capabilities"]), R"({"tools":{"listChanged":false}})");
  EXPECT_EQ(Text(result["serverInfo"]), R"({"name":"code-interpreter","version":"9.8.7"})");
  ASSERT_TRUE(result["instructions"].IsString());
  EXPECT_NE(std::string(result["instructions"].GetString()).find("execute_code"),
            std::string::npos);
  EXPECT_EQ(server_.session_count(), 1u);
}

TEST_F(McpServerTest, EverySessionHasItsOwnId) {
  std::string a = Open(), b = Open();
  EXPECT_NE(a, b);
  EXPECT_EQ(server_.session_count(), 2u);
}

TEST_F(McpServerTest, ASupportedVersionIsEchoedAnyOtherAnsweredWithTheNewest) {
  for (std::string_view v : {"2025-06-18", "2025-03-26", "2024-11-05"}) {
    rapidjson::Document result = Result(Post(InitializeRequest(v), ""));
    EXPECT_EQ(std::string(result["protocolVersion"].GetString()), v);
  }
  for (std::string_view v : {"2025-11-25", "1999-01-01"}) {
    rapidjson::Document result = Result(Post(InitializeRequest(v), ""));
    EXPECT_EQ(std::string(result["protocolVersion"].GetString()), "2025-06-18") << v;
  }
}

TEST_F(McpServerTest, InitializeEchoesAStringId) {
  McpHttpResponse r =
      Post(Request("initialize", R"({"protocolVersion":"2025-06-18"})", R"("init-1")"), "");
  EXPECT_EQ(std::string(Result(r, R"("init-1")")["protocolVersion"].GetString()), "2025-06-18");
}

TEST_F(McpServerTest, InitializeWithoutAProtocolVersionIsInvalidParams) {
  for (std::string_view params : {R"({"capabilities":{}})", R"({"protocolVersion":20250618})"}) {
    McpHttpResponse r = Post(Request("initialize", params), "");
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(Error(r, -32602).find("protocolVersion"), std::string::npos) << params;
    EXPECT_EQ(Header(r, "Mcp-Session-Id"), "");
  }
  EXPECT_EQ(server_.session_count(), 0u);
}

TEST_F(McpServerTest, ARequestWithoutASessionIsA400) {
  McpHttpResponse r = Post(Request("tools/list"), "");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(Error(r, -32000).find("Mcp-Session-Id"), std::string::npos) << r.body;
}

TEST_F(McpServerTest, AnUnknownSessionIsA404) {
  Open();
  McpHttpResponse r = Post(Request("tools/list"), "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(Error(r, -32001).find("initialize"), std::string::npos) << r.body;
}

TEST_F(McpServerTest, ASessionAnswersOnlyTheClientThatOpenedIt) {
  std::string session = Open("alice");
  EXPECT_EQ(Send("POST", Request("ping"), session, "alice").status, 200);
  McpHttpResponse r = Send("POST", Request("ping"), session, "bob");
  EXPECT_EQ(r.status, 404);
  Error(r, -32001);
  EXPECT_EQ(Send("DELETE", "", session, "bob").status, 404);
  EXPECT_EQ(Send("POST", Request("ping"), session, "alice").status, 200) << "still alice's";
}

TEST_F(McpServerTest, DeleteEndsTheSession) {
  std::string session = Open();
  McpHttpResponse r = Send("DELETE", "", session);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(server_.session_count(), 0u);
  r = Post(Request("ping"), session);
  EXPECT_EQ(r.status, 404);
  Error(r, -32001);
  r = Send("DELETE", "", session);
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(Error(r, -32001, "null").find("Session not found"), std::string::npos);
}

TEST_F(McpServerTest, DeleteWithoutASessionIsA400) {
  McpHttpResponse r = Send("DELETE", "", "");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(Error(r, -32000, "null").find("Mcp-Session-Id"), std::string::npos);
}

TEST_F(McpServerTest, TheLeastRecentlyUsedSessionIsEvicted) {
  // The fixture's server keeps 3.
  std::string a = Open(), b = Open(), c = Open();
  EXPECT_EQ(Post(Request("ping"), a).status, 200);  // b is now the least recently used
  std::string d = Open();
  EXPECT_EQ(server_.session_count(), 3u);
  EXPECT_EQ(Post(Request("ping"), b).status, 404);
  for (const std::string& kept : {a, c, d}) {
    EXPECT_EQ(Post(Request("ping"), kept).status, 200) << kept;
  }
}

// Issue #30 item 6: a client opening sessions without end evicts its own, not another's.
TEST_F(McpServerTest, AClientThatOpensManySessionsEvictsItsOwn) {
  std::string alice = Open("alice");
  std::vector<std::string> bobs;
  for (int i = 0; i < 10; ++i) bobs.push_back(Open("bob"));
  EXPECT_EQ(server_.session_count(), 3u);
  EXPECT_EQ(Send("POST", Request("ping"), alice, "alice").status, 200) << "alice's was evicted";
  EXPECT_EQ(Send("POST", Request("ping"), bobs.back(), "bob").status, 200);
  EXPECT_EQ(Send("POST", Request("ping"), bobs.front(), "bob").status, 404);
}

// A client at its share (mcp_sessions= in the key file) evicts its own oldest even with room.
TEST_F(McpServerTest, AClientAtItsShareEvictsItsOwnOldest) {
  std::string first = Open("carol"), second = Open("carol");
  EXPECT_EQ(server_.session_count(), 2u);
  std::string third = Open("carol");
  EXPECT_EQ(server_.session_count(), 2u) << "a third was room left, but not carol's";
  EXPECT_EQ(Send("POST", Request("ping"), first, "carol").status, 404);
  EXPECT_EQ(Send("POST", Request("ping"), second, "carol").status, 200);
  EXPECT_EQ(Send("POST", Request("ping"), third, "carol").status, 200);
  std::string alice = Open("alice");
  EXPECT_EQ(server_.session_count(), 3u);
  EXPECT_EQ(Send("POST", Request("ping"), alice, "alice").status, 200);
}

TEST_F(McpServerTest, AnUnsupportedProtocolVersionHeaderIsA400) {
  std::string session = Open();
  McpHttpResponse r = Send("POST", Request("ping"), session, "", "", "2099-01-01");
  EXPECT_EQ(r.status, 400);
  std::string message = Error(r, -32000);
  EXPECT_NE(message.find("2099-01-01"), std::string::npos) << message;
  EXPECT_NE(message.find("2025-06-18"), std::string::npos) << message;
  for (std::string_view v : {"2025-06-18", "2025-03-26", "2024-11-05"}) {
    EXPECT_EQ(Send("POST", Request("ping"), session, "", "", v).status, 200) << v;
  }
}

// --- messages without an answer ---------------------------------------------------------------

TEST_F(McpServerTest, NotificationsAreAcceptedWithoutABody) {
  std::string session = Open();
  for (std::string_view note : {R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
                                R"({"jsonrpc":"2.0","method":"notifications/cancelled",)"
                                R"("params":{"requestId":1}})"}) {
    McpHttpResponse r = Post(note, session);
    EXPECT_EQ(r.status, 202) << note;
    EXPECT_EQ(r.body, "");
    EXPECT_EQ(r.content_type, "");
  }
}

TEST_F(McpServerTest, ANotificationNeedsASessionToo) {
  McpHttpResponse r = Post(R"({"jsonrpc":"2.0","method":"notifications/initialized"})", "");
  EXPECT_EQ(r.status, 400);
  Error(r, -32000, "null");
}

TEST_F(McpServerTest, TheClientsResponsesAreAccepted) {
  std::string session = Open();
  EXPECT_EQ(Post(R"({"jsonrpc":"2.0","id":"s1","result":{}})", session).status, 202);
  EXPECT_EQ(Post(R"({"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"no"}})", session).status,
            202);
}

// --- methods ----------------------------------------------------------------------------------

TEST_F(McpServerTest, PingAnswersAnEmptyObject) {
  std::string session = Open();
  EXPECT_EQ(Text(Result(Post(Request("ping", "", "42"), session), "42")), "{}");
}

TEST_F(McpServerTest, ToolsListHasEveryDeclarationWithItsSchemaAsAnObject) {
  std::string session = Open();
  rapidjson::Document result = Result(Post(Request("tools/list"), session));
  ASSERT_TRUE(result["tools"].IsArray());
  ASSERT_EQ(result["tools"].Size(), 2u);
  const rapidjson::Value& first = result["tools"][0];
  EXPECT_EQ(std::string(first["name"].GetString()), "execute_code");
  EXPECT_EQ(std::string(first["description"].GetString()), "Runs a program.");
  EXPECT_EQ(Text(first["inputSchema"]), kExecuteSchema);
  EXPECT_EQ(std::string(result["tools"][1]["name"].GetString()), "solve_task");

  tools_.declarations.pop_back();  // as when no model is configured
  result = Result(Post(Request("tools/list"), session));
  ASSERT_EQ(result["tools"].Size(), 1u);
}

TEST_F(McpServerTest, ASchemaThatIsNotJsonIsAnInternalErrorNamingTheTool) {
  std::string session = Open();
  tools_.declarations[1].parameters_json = "{not json";
  McpHttpResponse r = Post(Request("tools/list"), session);
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(Error(r, -32603).find("solve_task"), std::string::npos) << r.body;
}

TEST_F(McpServerTest, ToolsCallPassesTheArgumentsAndAnswersTheOutcome) {
  std::string session = Open("alice");
  tools_.outcomes["execute_code"] = {.is_error = false,
                                     .text = "42\n",
                                     .result_json = R"({"stdout":"42\n","exit_code":0})",
                                     .images = {{"image/png", "iVBORw0KGgo="}}};
  std::string arguments = R"j({"code":"print(6*7)"})j";
  McpHttpResponse r = Send(
      "POST", Request("tools/call", R"({"name":"execute_code","arguments":)" + arguments + "}"),
      session, "alice");
  rapidjson::Document result = Result(r);
  ASSERT_EQ(tools_.calls.size(), 1u);
  EXPECT_EQ(tools_.calls[0].name, "execute_code");
  EXPECT_EQ(tools_.calls[0].arguments_json, arguments);
  EXPECT_EQ(tools_.calls[0].client, "alice");
  // The text first, then each image the program made.
  EXPECT_EQ(Text(result["content"]),
            R"([{"type":"text","text":"42\n"},)"
            R"({"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}])");
  EXPECT_EQ(Text(result["structuredContent"]), R"({"stdout":"42\n","exit_code":0})");
  EXPECT_EQ(result["isError"].GetBool(), false);
}

TEST_F(McpServerTest, ToolsCallWithoutArgumentsPassesAnEmptyObject) {
  std::string session = Open();
  tools_.outcomes["solve_task"] = {
      .is_error = false, .text = "done", .result_json = "{}", .images = {}};
  Result(Post(Request("tools/call", R"({"name":"solve_task"})"), session));
  ASSERT_EQ(tools_.calls.size(), 1u);
  EXPECT_EQ(tools_.calls[0].arguments_json, "{}");
}

TEST_F(McpServerTest, AFailedCallIsAnErrorResultWithoutStructuredContent) {
  std::string session = Open();
  tools_.outcomes["execute_code"] = {
      .is_error = true, .text = "code: a string is required", .result_json = "{}", .images = {}};
  rapidjson::Document result = Result(
      Post(Request("tools/call", R"({"name":"execute_code","arguments":{"code":1}})"), session));
  EXPECT_EQ(result["isError"].GetBool(), true);
  EXPECT_EQ(std::string(result["content"][0]["text"].GetString()), "code: a string is required");
  EXPECT_FALSE(result.HasMember("structuredContent"));
}

TEST_F(McpServerTest, OlderProtocolVersionsGetNoStructuredContent) {
  tools_.outcomes["execute_code"] = {
      .is_error = false, .text = "ok", .result_json = R"({"a":1})", .images = {}};
  std::string call = Request("tools/call", R"({"name":"execute_code","arguments":{}})");
  rapidjson::Document result = Result(Post(call, Open("", "2025-03-26")));
  EXPECT_EQ(std::string(result["content"][0]["text"].GetString()), "ok");
  EXPECT_FALSE(result.HasMember("structuredContent"));
  result = Result(Post(call, Open("", "2025-06-18")));
  EXPECT_EQ(Text(result["structuredContent"]), R"({"a":1})");
}

TEST_F(McpServerTest, AResultThatIsNotAnObjectIsLeftOutOfStructuredContent) {
  std::string session = Open();
  tools_.outcomes["execute_code"] = {
      .is_error = false, .text = "ok", .result_json = "[1]", .images = {}};
  rapidjson::Document result =
      Result(Post(Request("tools/call", R"({"name":"execute_code"})"), session));
  EXPECT_FALSE(result.HasMember("structuredContent"));
  EXPECT_EQ(result["isError"].GetBool(), false);
}

TEST_F(McpServerTest, AnUnknownToolIsInvalidParamsNamingIt) {
  std::string session = Open();
  McpHttpResponse r = Post(Request("tools/call", R"({"name":"rm_rf","arguments":{}})"), session);
  EXPECT_EQ(r.status, 200);
  std::string message = Error(r, -32602);
  EXPECT_NE(message.find("rm_rf"), std::string::npos) << message;
  EXPECT_NE(message.find("execute_code"), std::string::npos) << "names what there is";
  EXPECT_TRUE(tools_.calls.empty());
}

TEST_F(McpServerTest, AToolThatIsNotDeclaredNowIsUnknown) {
  std::string session = Open();
  tools_.declarations.pop_back();  // solve_task without a model
  McpHttpResponse r = Post(Request("tools/call", R"({"name":"solve_task"})"), session);
  EXPECT_NE(Error(r, -32602).find("solve_task"), std::string::npos);
  EXPECT_TRUE(tools_.calls.empty());
}

TEST_F(McpServerTest, ParamsOfTheWrongTypeAreInvalidParams) {
  std::string session = Open();
  for (std::string_view params : {R"([1,2])", R"("execute_code")", R"({"arguments":{}})",
                                  R"({"name":7})", R"({"name":"execute_code","arguments":[]})",
                                  R"({"name":"execute_code","arguments":"{\"code\":\"1\"}"})"}) {
    McpHttpResponse r = Post(Request("tools/call", params), session);
    EXPECT_EQ(r.status, 200) << params;
    EXPECT_NE(Error(r, -32602).find("Invalid params"), std::string::npos) << params;
  }
  McpHttpResponse r = Post(Request("tools/call"), session);  // no params at all
  EXPECT_NE(Error(r, -32602).find("params.name"), std::string::npos);
  EXPECT_TRUE(tools_.calls.empty());
}

TEST_F(McpServerTest, AToolThatThrowsIsAnInternalError) {
  std::string session = Open();
  tools_.throws = true;
  McpHttpResponse r = Post(Request("tools/call", R"({"name":"execute_code"})"), session);
  EXPECT_EQ(r.status, 200);
  std::string message = Error(r, -32603);
  EXPECT_NE(message.find("the sandbox is gone"), std::string::npos) << message;
}

TEST_F(McpServerTest, ASessionEndedDuringACallStillGetsTheAnswer) {
  std::string session = Open();
  tools_.outcomes["execute_code"] = {
      .is_error = false, .text = "late", .result_json = "{}", .images = {}};
  tools_.gate = std::make_unique<asio::steady_timer>(io_, asio::steady_timer::time_point::max());
  std::string call = Request("tools/call", R"({"name":"execute_code"})");
  McpHttpRequest request{.method = "POST",
                         .body = call,
                         .session_id = session,
                         .accept = "",
                         .protocol_version = "",
                         .client = ""};
  std::optional<McpHttpResponse> answer;
  asio::co_spawn(
      io_, [&]() -> asio::awaitable<void> { answer = co_await server_.Handle(request); },
      asio::detached);
  io_.restart();
  while (tools_.calls.empty() && io_.run_one() > 0) {
  }
  ASSERT_EQ(tools_.calls.size(), 1u);
  EXPECT_EQ(Send("DELETE", "", session).status, 200);
  EXPECT_EQ(server_.session_count(), 0u);
  ASSERT_FALSE(answer.has_value()) << "the call is still in the tool";
  tools_.gate->cancel();
  io_.restart();
  while (!answer && io_.run_one() > 0) {
  }
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(std::string(Result(*answer)["content"][0]["text"].GetString()), "late");
}

TEST_F(McpServerTest, AnUnknownMethodIsMethodNotFoundNamingIt) {
  std::string session = Open();
  McpHttpResponse r = Post(Request("resources/list"), session);
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(Error(r, -32601).find("resources/list"), std::string::npos) << r.body;
}

// --- malformed messages -----------------------------------------------------------------------

TEST_F(McpServerTest, UnparsableJsonIsA400ParseErrorWithANullId) {
  std::string session = Open();
  for (std::string_view body : {"{\"jsonrpc\":", "", "not json"}) {
    McpHttpResponse r = Post(body, session);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_EQ(Error(r, -32700, "null").rfind("Parse error: ", 0), 0u) << body;
  }
}

// Issue 30 item 3: arguments nested 200,000 deep overflowed the stack when written back out.
TEST_F(McpServerTest, ArgumentsNestedTooDeepAreAParseError) {
  std::string session = Open();
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  McpHttpResponse r = Post(R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":)"
                           R"({"name":"execute_code","arguments":)" +
                               deep + "}}",
                           session);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(Error(r, -32700, "null").find("nested deeper than 128 levels"), std::string::npos);
}

TEST_F(McpServerTest, ABatchIsRefused) {
  std::string session = Open();
  McpHttpResponse r = Post("[" + Request("ping") + "," + Request("tools/list") + "]", session);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(Error(r, -32600, "null").find("batches are not supported"), std::string::npos);
}

TEST_F(McpServerTest, AMessageThatIsNotJsonRpcIsAnInvalidRequest) {
  std::string session = Open();
  struct Case {
    std::string_view body, id, says;
  };
  for (const Case& c :
       {Case{R"({"id":1,"method":"ping"})", "1", "jsonrpc"},
        Case{R"({"jsonrpc":"1.0","id":1,"method":"ping"})", "1", "jsonrpc"},
        Case{R"({"jsonrpc":"2.0","id":1,"method":5})", "1", "method"},
        Case{R"({"jsonrpc":"2.0","id":null,"method":"ping"})", "null", "id"},
        Case{R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})", "null", "id"},
        Case{R"({"jsonrpc":"2.0","id":1})", "1", "neither"}, Case{R"("ping")", "null", "object"}}) {
    McpHttpResponse r = Post(c.body, session);
    EXPECT_EQ(r.status, 400) << c.body;
    std::string message = Error(r, -32600, c.id);
    EXPECT_NE(message.find(c.says), std::string::npos) << c.body << ": " << message;
  }
}

TEST_F(McpServerTest, ParamsThatAreNotAnObjectAreInvalidParamsForEveryMethod) {
  std::string session = Open();
  McpHttpResponse r = Post(Request("ping", "[]"), session);
  EXPECT_NE(Error(r, -32602).find("ping"), std::string::npos);
  r = Post(Request("initialize", R"("2025-06-18")"), "");
  Error(r, -32602);
}

// --- HTTP
// ---------------------------------------------------------------------------------------

TEST_F(McpServerTest, GetAndOtherMethodsAre405WithAllow) {
  std::string session = Open();
  for (std::string_view method : {"GET", "PUT", "PATCH"}) {
    McpHttpResponse r = Send(method, "", session);
    EXPECT_EQ(r.status, 405) << method;
    EXPECT_EQ(Header(r, "Allow"), "POST, DELETE");
    EXPECT_NE(Error(r, -32000, "null").find(method), std::string::npos) << r.body;
  }
}

TEST_F(McpServerTest, AnAcceptHeaderWithoutJsonIs406) {
  std::string session = Open();
  for (std::string_view accept : {"text/html", "text/event-stream", "application/xml;q=0.9"}) {
    McpHttpResponse r = Send("POST", Request("ping"), session, "", accept);
    EXPECT_EQ(r.status, 406) << accept;
    EXPECT_NE(Error(r, -32000, "null").find(accept), std::string::npos) << r.body;
  }
  for (std::string_view accept :
       {"", "*/*", "application/json", "application/json, text/event-stream",
        "text/event-stream, Application/JSON;q=0.5", "text/html,application/*"}) {
    EXPECT_EQ(Send("POST", Request("ping"), session, "", accept).status, 200) << accept;
  }
}

}  // namespace
}  // namespace ci::daemon
