#include "daemon/front/routes.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "daemon/api/handlers.h"
#include "daemon/mcp/mcp_front.h"

namespace ci::daemon {
namespace {

TEST(MatchPath, LiteralPathsMatchExactly) {
  EXPECT_EQ(MatchPath("/v1/files", "/v1/files"), "");
  EXPECT_EQ(MatchPath("/v1/files", "/v1/files/"), std::nullopt);
  EXPECT_EQ(MatchPath("/v1/files", "/v1/file"), std::nullopt);
  EXPECT_EQ(MatchPath("/v1/files", "/v1/files/x"), std::nullopt);
  EXPECT_EQ(MatchPath("/v1/files", "v1/files"), std::nullopt);
}

TEST(MatchPath, AParameterIsOneNonEmptySegment) {
  EXPECT_EQ(MatchPath("/v1/files/{file_id}", "/v1/files/abc"), "abc");
  EXPECT_EQ(MatchPath("/v1/files/{file_id}", "/v1/files/"), std::nullopt);
  EXPECT_EQ(MatchPath("/v1/files/{file_id}", "/v1/files/a/b"), std::nullopt);
  EXPECT_EQ(MatchPath("/v1/sessions/{session_id}/bash", "/v1/sessions/s1/bash"), "s1");
  EXPECT_EQ(MatchPath("/v1/sessions/{session_id}/bash", "/v1/sessions//bash"), std::nullopt);
  EXPECT_EQ(MatchPath("/v1/sessions/{session_id}/bash", "/v1/sessions/s1/bash/"), std::nullopt);
}

TEST(MatchPath, ParametersArePercentDecoded) {
  EXPECT_EQ(MatchPath("/v1/files/{file_id}", "/v1/files/a%20b"), "a b");
  // The escaped slash stays inside the one segment: it cannot reach another route.
  EXPECT_EQ(MatchPath("/v1/files/{file_id}", "/v1/files/a%2Fb"), "a/b");
  EXPECT_EQ(PercentDecode("100%"), "100%");
  EXPECT_EQ(PercentDecode("%zz%4"), "%zz%4");
}

TEST(QueryParameter, FindsDecodesAndDefaults) {
  EXPECT_EQ(QueryParameter("/v1/tools?format=gemini", "format"), "gemini");
  EXPECT_EQ(QueryParameter("/v1/tools?a=1&format=open%61i&format=x", "format"), "openai");
  EXPECT_EQ(QueryParameter("/v1/tools?q=a+b", "q"), "a b");
  EXPECT_EQ(QueryParameter("/v1/tools?format", "format"), "");
  EXPECT_EQ(QueryParameter("/v1/tools?formats=x", "format"), std::nullopt);
  EXPECT_EQ(QueryParameter("/v1/tools", "format"), std::nullopt);
}

TEST(RouteTable, EveryMethodAndPatternIsServedOnce) {
  std::set<std::string> seen;
  for (const auto& r : ApiHandlers::Routes()) {
    EXPECT_TRUE(r.pattern.starts_with("/")) << r.pattern;
    EXPECT_NE(r.handler, nullptr) << r.pattern;
    EXPECT_TRUE(seen.insert(std::string(r.method) + " " + std::string(r.pattern)).second)
        << r.method << " " << r.pattern;
  }
  for (const RouteSpec& r : McpFront::Routes()) {
    EXPECT_TRUE(seen.insert(std::string(r.method) + " " + std::string(r.pattern)).second)
        << r.method << " " << r.pattern;
  }
  EXPECT_EQ(seen.size(), 31u);
}

}  // namespace
}  // namespace ci::daemon
