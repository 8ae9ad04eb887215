// The error shapes of the API over HTTP (docs/api.md "Conventions"): {"detail"} with 404, 405
// (Allow), 413 and 422, decided before any sandbox is prepared.
#include "fake_daemon.h"

namespace ci::daemon {
namespace {

class ErrorsApiTest : public DaemonApiTest {
 protected:
  void SetUp() override {
    Start([](Config& c) { c.max_request_body_mb = 1; });
  }
  void TearDown() override {
    EXPECT_EQ(fake().counts().prepared, 0) << "an invalid request reached the backend";
    DaemonApiTest::TearDown();
  }
};

TEST_F(ErrorsApiTest, AnUnknownPathIs404) {
  HttpReply r = client().Get("/v1/nothing");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, R"({"detail":"Not Found"})");
  EXPECT_EQ(r.Header("content-type").value_or(""), "application/json");
}

TEST_F(ErrorsApiTest, AKnownPathWithTheWrongMethodIs405WithAllow) {
  HttpReply r = client().Get("/v1/execute");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("allow").value_or(""), "POST");
  EXPECT_FALSE(Str(Json(r), "detail").empty()) << r.body;
  EXPECT_EQ(client().Send("PUT", "/v1/files/x").Header("allow").value_or(""), "GET, DELETE");
}

TEST_F(ErrorsApiTest, ABodyOverTheLimitIs413) {
  HttpReply r = client().Post("/v1/execute", std::string((1 << 20) + 1, ' '));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(Str(Json(r), "detail"), "Request body exceeds maximum of 1 MB");
}

TEST_F(ErrorsApiTest, MalformedOrInvalidRequestsAre422) {
  for (const char* body :
       {"not json", "{}", R"({"code": 5})", R"({"code": "x", "timeout_ms": -1})"}) {
    HttpReply r = client().Post("/v1/execute", body);
    EXPECT_EQ(r.status, 422) << body;
    EXPECT_FALSE(Str(Json(r), "detail").empty()) << r.body;
  }
}

TEST_F(ErrorsApiTest, AnUnknownLanguageIs422NamingTheAvailableOnes) {
  HttpReply r = client().Post("/v1/execute", R"({"code": "x", "language": "cobol"})");
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(Str(Json(r), "detail").rfind("Unsupported language 'cobol'. Available: python", 0), 0u)
      << r.body;
}

TEST_F(ErrorsApiTest, AnUploadWithoutAFilePartIs422) {
  HttpReply r = client().Send("POST", "/v1/files", "x", "text/plain");
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(Str(Json(r), "detail"), "A 'file' form field is required.");
}

}  // namespace
}  // namespace ci::daemon
