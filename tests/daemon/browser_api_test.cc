// Requests a browser sends for a page of another site (issue #30 item 5, http/browser_guard.h):
// refused before anything runs, on every route, while clients that are not browsers (no Origin,
// this server's Host, a JSON content type) are served as before.
#include "fake_daemon.h"

namespace ci::daemon {
namespace {

using Headers = HttpClient::Headers;

class BrowserApiTest : public DaemonApiTest {
 protected:
  int Status(const std::string& method, const std::string& target, const Headers& headers,
             const std::string& body = "", const std::string& type = "application/json") {
    return client().Send(method, target, body, type, headers).status;
  }
};

TEST_F(BrowserApiTest, APageOfAnotherSiteIsRefusedOnEveryRoute) {
  Start();
  for (const char* origin : {"http://evil.example", "http://127.0.0.1.evil.example:8000",
                             "https://127.evil.example", "null", "http://[::2]:80"}) {
    const Headers h = {{"origin", origin}};
    // The cross-site "simple" request that ran code: a text/plain POST.
    HttpReply r = client().Send("POST", "/v1/execute", R"j({"code":"print(1)"})j", "text/plain", h);
    EXPECT_EQ(r.status, 403) << origin;
    EXPECT_NE(Str(Json(r), "detail").find("ALLOWED_ORIGINS"), std::string::npos) << r.body;
    EXPECT_EQ(Status("GET", "/v1/files", h), 403) << origin;
    EXPECT_EQ(Status("POST", "/v1/sessions", h, "{}"), 403) << origin;
    EXPECT_EQ(Status("POST", "/mcp", h, R"({"jsonrpc":"2.0","id":1,"method":"ping"})"), 403);
    EXPECT_EQ(Status("GET", "/nothing", h), 403) << origin;
  }
  EXPECT_EQ(fake().counts().prepared, 0) << "a refused request reached the backend";
  for (const char* origin :
       {"http://localhost:8000", "http://127.0.0.1", "http://[::1]:3000", "https://LOCALHOST"}) {
    EXPECT_EQ(Status("GET", "/v1/files", {{"origin", origin}}), 200) << origin;
  }
}

TEST_F(BrowserApiTest, AllowedOriginsAreServed) {
  Start([](Config& c) { c.allowed_origins = {"https://ui.example:8443"}; });
  EXPECT_EQ(Status("GET", "/v1/files", {{"origin", "https://ui.example:8443"}}), 200);
  EXPECT_EQ(Status("GET", "/v1/files", {{"origin", "https://ui.example"}}), 403);
}

TEST_F(BrowserApiTest, WithoutKeysAHostThatDoesNotNameThisServerIsRefused) {
  Start();  // listening on 127.0.0.1
  // A DNS name rebound to 127.0.0.1: the page's own same-origin GET, no Origin sent.
  HttpReply r = client().Send("GET", "/v1/files", "", "application/json",
                              {{"host", "rebound.evil.example:8000"}});
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(Str(Json(r), "detail").find("ALLOWED_HOSTS"), std::string::npos) << r.body;
  for (const char* host : {"127.0.0.1:8000", "localhost", "[::1]:8000", "127.0.0.2"}) {
    EXPECT_EQ(Status("GET", "/v1/files", {{"host", host}}), 200) << host;
  }
}

TEST_F(BrowserApiTest, AllowedHostsAndAServerOnEveryAddressTakeOtherNames) {
  Start([](Config& c) { c.allowed_hosts = {"code-interpreter"}; });
  EXPECT_EQ(Status("GET", "/v1/files", {{"host", "code-interpreter:8000"}}), 200);
  EXPECT_EQ(Status("GET", "/v1/files", {{"host", "evil.example"}}), 403);
  TearDown();
  // On every address (HOST=0.0.0.0, e.g. a Compose service name) no list means any name.
  Start([](Config& c) { c.host = "0.0.0.0"; });
  EXPECT_EQ(Status("GET", "/v1/files", {{"host", "code-interpreter:8000"}}), 200);
}

TEST_F(BrowserApiTest, AJsonBodyNeedsAJsonContentType) {
  Start();
  for (const char* type : {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                           "application/jsonx", ""}) {
    HttpReply r = client().Send("POST", "/v1/execute", R"j({"code":"print(1)"})j", type);
    EXPECT_EQ(r.status, 415) << type;
    EXPECT_NE(Str(Json(r), "detail").find("Content-Type: application/json"), std::string::npos)
        << r.body;
    EXPECT_EQ(client().Send("POST", "/v1/sessions", "{}", type).status, 415) << type;
  }
  EXPECT_EQ(fake().counts().prepared, 0) << "a refused request reached the backend";
  EXPECT_EQ(client()
                .Send("POST", "/v1/execute", R"j({"code":"print(1)"})j",
                      "Application/JSON; charset=utf-8")
                .status,
            200);
  // A body-less POST has no type to declare.
  HttpReply session = client().Send("POST", "/v1/sessions", "", "");
  EXPECT_EQ(session.status, 201) << session.body;
}

}  // namespace
}  // namespace ci::daemon
