// docs/openapi.json, as compiled into the binary, against the route table it describes
// (ApiHandlers::Routes() and McpFront::Routes()) and the answers the dispatcher and the shared
// handler steps give (handlers.cc): every route documented and nothing else, and every operation
// listing the statuses those steps can answer, in the error shape.
#include "daemon/api/openapi.h"

#include <gtest/gtest.h>
#include <rapidjson/pointer.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "core/json.h"
#include "daemon/api/handlers.h"
#include "daemon/mcp/mcp_front.h"

namespace ci::daemon {
namespace {

// What the daemon's REST and MCP fronts serve: what docs/openapi.json describes.
std::vector<RouteSpec> ServedRoutes() {
  std::vector<RouteSpec> out;
  for (const auto& r : ApiHandlers::Routes()) out.push_back({r.method, r.pattern});
  for (const RouteSpec& r : McpFront::Routes()) out.push_back(r);
  return out;
}

using rapidjson::Value;

class OpenApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    ASSERT_TRUE(ParseJson(OpenApiDocument(), doc_, why)) << why;
    ASSERT_TRUE(doc_.IsObject());
  }

  // `v` with its "$ref" (a "#/..." pointer into the document) followed; nullptr if it dangles.
  const Value* Resolve(const Value& v) const {
    if (!v.IsObject() || !v.HasMember("$ref")) return &v;
    std::string ref = v["$ref"].GetString();
    if (!ref.starts_with("#/")) return nullptr;
    const Value* target = rapidjson::Pointer(ref.substr(1).c_str()).Get(doc_);
    return target == nullptr ? nullptr : Resolve(*target);
  }

  // The operation of a route: paths[pattern][lowercase method], or nullptr.
  const Value* Operation(const RouteSpec& r) const {
    std::string method(r.method);
    std::transform(method.begin(), method.end(), method.begin(), ::tolower);
    std::string pattern(r.pattern);
    auto path = doc_["paths"].FindMember(pattern.c_str());
    if (path == doc_["paths"].MemberEnd()) return nullptr;
    auto op = path->value.FindMember(method.c_str());
    return op == path->value.MemberEnd() ? nullptr : &op->value;
  }

  // The resolved response of `op` for `status` ("404", "default"), or nullptr.
  const Value* Response(const Value& op, const char* status) const {
    auto it = op["responses"].FindMember(status);
    return it == op["responses"].MemberEnd() ? nullptr : Resolve(it->value);
  }

  // True when the response's JSON body is components.schemas.Error, or a schema that is all of
  // it and more (the agent loop's errors keep their attempts).
  bool HasErrorShape(const Value& response) const {
    if (!response.HasMember("content")) return false;
    auto json = response["content"].FindMember("application/json");
    if (json == response["content"].MemberEnd()) return false;
    const Value* schema = &json->value["schema"];
    if (schema->IsObject() && schema->HasMember("$ref")) {
      const Value* named = Resolve(*schema);
      if (named != nullptr && named->HasMember("allOf")) schema = &(*named)["allOf"][0];
    }
    return schema->IsObject() && schema->HasMember("$ref") &&
           std::string_view((*schema)["$ref"].GetString()) == "#/components/schemas/Error";
  }

  static bool HasHeader(const Value& response, const char* name) {
    return response.HasMember("headers") && response["headers"].HasMember(name);
  }

  rapidjson::Document doc_;
};

TEST_F(OpenApiTest, IsOpenApi31OfThisVersion) {
  EXPECT_TRUE(std::string_view(doc_["openapi"].GetString()).starts_with("3.1."));
  EXPECT_STREQ(doc_["info"]["version"].GetString(), CI_VERSION);
}

TEST_F(OpenApiTest, DocumentsEveryRouteAndNothingElse) {
  std::set<std::string> routes, documented;
  for (const RouteSpec& r : ServedRoutes()) {
    std::string method(r.method);
    std::transform(method.begin(), method.end(), method.begin(), ::tolower);
    routes.insert(method + " " + std::string(r.pattern));
  }
  const std::set<std::string> kMethods = {"get",   "put",  "post",    "delete",
                                          "patch", "head", "options", "trace"};
  for (const auto& path : doc_["paths"].GetObject()) {
    for (const auto& method : path.value.GetObject()) {
      if (kMethods.contains(method.name.GetString())) {
        documented.insert(std::string(method.name.GetString()) + " " + path.name.GetString());
      }
    }
  }
  EXPECT_EQ(documented, routes);
}

TEST_F(OpenApiTest, EveryReferenceResolves) {
  std::vector<const Value*> todo = {&doc_};
  while (!todo.empty()) {
    const Value* v = todo.back();
    todo.pop_back();
    if (v->IsObject()) {
      if (v->HasMember("$ref")) {
        EXPECT_NE(Resolve(*v), nullptr) << (*v)["$ref"].GetString();
      }
      for (const auto& m : v->GetObject()) todo.push_back(&m.value);
    } else if (v->IsArray()) {
      for (const auto& e : v->GetArray()) todo.push_back(&e);
    }
  }
}

// The dispatcher's own answers (ApiHandlers::Handle) and those of the steps every handler of a
// kind shares (ReadJsonBody, the parsers' 422): a route's operation must list them.
TEST_F(OpenApiTest, EveryOperationListsTheDispatchersAnswers) {
  for (const RouteSpec& r : ServedRoutes()) {
    SCOPED_TRACE(std::string(r.method) + " " + std::string(r.pattern));
    const Value* op = Operation(r);
    if (op == nullptr) continue;  // DocumentsEveryRouteAndNothingElse names it
    // Everything else (400 bad request line, 405, 431, 500) is `default`, in the error shape.
    const Value* other = Response(*op, "default");
    ASSERT_NE(other, nullptr);
    EXPECT_TRUE(HasErrorShape(*other));
    // A `{name}` segment is a documented path parameter, and an unknown value is 404.
    if (auto open = r.pattern.find('{'); open != std::string_view::npos) {
      std::string name(r.pattern.substr(open + 1, r.pattern.find('}') - open - 1));
      ASSERT_TRUE(op->HasMember("parameters"));
      bool declared = false;
      for (const auto& p : (*op)["parameters"].GetArray()) {
        declared |=
            name == p["name"].GetString() && std::string_view(p["in"].GetString()) == "path";
      }
      EXPECT_TRUE(declared) << name;
      EXPECT_NE(Response(*op, "404"), nullptr);
    }
    if (r.pattern.starts_with("/v1/sessions")) {
      EXPECT_NE(Response(*op, "501"), nullptr);
    }
    // With API keys on, everything but the probes and the description may be 401.
    const bool open =
        r.pattern == "/health" || r.pattern == "/ready" || r.pattern == "/openapi.json";
    EXPECT_EQ(Response(*op, "401") != nullptr, !open);
    // Every POST reads a body: incomplete (400), too large (413), invalid (422).
    EXPECT_EQ(op->HasMember("requestBody"), r.method == "POST");
    if (r.method == "POST") {
      for (const char* status : {"400", "413", "422"}) {
        // MCP answers a body it cannot take with a JSON-RPC error under 400, never 422.
        if (r.pattern == "/mcp" && std::string_view(status) == "422") continue;
        EXPECT_NE(Response(*op, status), nullptr) << status;
      }
    }
    // The streams are SSE once they began.
    if (r.pattern.ends_with("/stream")) {
      const Value* ok = Response(*op, "200");
      ASSERT_NE(ok, nullptr);
      auto sse = (*ok)["content"].FindMember("text/event-stream");
      ASSERT_NE(sse, (*ok)["content"].MemberEnd());
      for (const char* event : {"output", "result", "error"}) {
        EXPECT_TRUE(sse->value["x-sse-events"].HasMember(event)) << event;
      }
    }
  }
}

TEST_F(OpenApiTest, ErrorsHaveTheErrorShapeAndRetryAfterWhereSent) {
  for (const RouteSpec& r : ServedRoutes()) {
    SCOPED_TRACE(std::string(r.method) + " " + std::string(r.pattern));
    const Value* op = Operation(r);
    if (op == nullptr) continue;  // DocumentsEveryRouteAndNothingElse names it
    for (const auto& entry : (*op)["responses"].GetObject()) {
      std::string status = entry.name.GetString();
      SCOPED_TRACE(status);
      if (status == "default") continue;
      ASSERT_EQ(status.size(), 3u);
      EXPECT_TRUE(status[0] >= '2' && status[0] <= '5');
      const Value* response = Resolve(entry.value);
      ASSERT_NE(response, nullptr);
      // /ready's 503 is the health body by design (docs/api.md "GET /ready"); /mcp answers
      // JSON-RPC error objects, as the MCP transport asks.
      if (status[0] < '4' || r.pattern == "/ready") continue;
      if (r.pattern == "/mcp" && status != "401" && status != "413") continue;
      EXPECT_TRUE(HasErrorShape(*response));
      // Admission (429) and capacity (503) refusals carry Retry-After (ApiErrorResponse, Admit).
      if (status == "429" || status == "503") {
        EXPECT_TRUE(HasHeader(*response, "Retry-After"));
      }
    }
  }
}

TEST_F(OpenApiTest, MethodNotAllowedIsDocumentedWithItsAllowHeader) {
  const Value* response = Resolve(doc_["components"]["responses"]["MethodNotAllowed"]);
  ASSERT_NE(response, nullptr);
  EXPECT_TRUE(HasErrorShape(*response));
  EXPECT_TRUE(HasHeader(*response, "Allow"));
}

}  // namespace
}  // namespace ci::daemon
