#include "daemon/api/request_parsing.h"

#include <gtest/gtest.h>

namespace ci::daemon {
namespace {

std::string ErrorOf(std::string_view body) {
  auto r = ParseExecuteRequest(body, 60000);
  return r.ok() ? "" : r.status().message();
}

TEST(ParseExecuteRequest, Defaults) {
  auto r = ParseExecuteRequest(R"({"code":"pass"})", 60000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->code, "pass");
  EXPECT_EQ(r->timeout_ms, 2000);
  EXPECT_TRUE(r->last_line_interactive);
  EXPECT_FALSE(r->stdin_data.has_value());
  EXPECT_TRUE(r->files.empty());
  EXPECT_EQ(r->language, "python");
}

TEST(ParseExecuteRequest, AllFields) {
  auto r = ParseExecuteRequest(
      R"({"code":"","stdin":"hi\n","timeout_ms":1500,"last_line_interactive":false,
          "files":[{"path":"a.csv","file_id":"x"}],"language":"bash","unknown":[1,2]})",
      60000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->code, "");
  EXPECT_EQ(r->stdin_data, "hi\n");
  EXPECT_EQ(r->timeout_ms, 1500);
  EXPECT_FALSE(r->last_line_interactive);
  ASSERT_EQ(r->files.size(), 1u);
  EXPECT_EQ(r->files[0].path, "a.csv");
  EXPECT_EQ(r->files[0].file_id, "x");
  EXPECT_EQ(r->language, "bash");
}

TEST(ParseExecuteRequest, NullStdinIsNoStdin) {
  auto r = ParseExecuteRequest(R"({"code":"x","stdin":null})", 60000);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->stdin_data.has_value());
}

TEST(ParseExecuteRequest, ValidationMessages) {
  EXPECT_EQ(ErrorOf("{}"), "Field 'code' is required.");
  EXPECT_EQ(ErrorOf(R"({"code":1})"), "Field 'code' must be a string.");
  EXPECT_EQ(ErrorOf(R"({"code":"x","timeout_ms":0})"),
            "timeout_ms must be greater than or equal to 1");
  EXPECT_EQ(ErrorOf(R"({"code":"x","timeout_ms":60001})"),
            "timeout_ms exceeds maximum of 60000 ms");
  EXPECT_EQ(ErrorOf(R"({"code":"x","timeout_ms":1.5})"), "Field 'timeout_ms' must be an integer.");
  EXPECT_EQ(ErrorOf(R"({"code":"x","timeout_ms":1.0})"), "Field 'timeout_ms' must be an integer.");
  EXPECT_EQ(ErrorOf(R"({"code":"x","timeout_ms":"100"})"),
            "Field 'timeout_ms' must be an integer.");
  EXPECT_EQ(ErrorOf(R"({"code":"x","timeout_ms":1e40})"), "Field 'timeout_ms' must be an integer.");
  EXPECT_EQ(ErrorOf(R"({"code":"x","last_line_interactive":"yes"})"),
            "Field 'last_line_interactive' must be a boolean.");
  EXPECT_EQ(ErrorOf(R"({"code":"x","stdin":5})"), "Field 'stdin' must be a string or null.");
  EXPECT_EQ(ErrorOf(R"({"code":"x","files":{}})"), "Field 'files' must be an array.");
  EXPECT_EQ(ErrorOf(R"({"code":"x","files":[{"path":"a"}]})"),
            "Each file must include both 'path' and 'file_id'.");
  EXPECT_EQ(ErrorOf(R"({"code":"x","files":[{"path":"a","file_id":3}]})"),
            "Each file must include both 'path' and 'file_id'.");
  EXPECT_EQ(ErrorOf(R"({"code":"x","language":7})"), "Field 'language' must be a string.");
}

TEST(ParseExecuteRequest, MalformedBodies) {
  EXPECT_EQ(ErrorOf("[1]"), "Invalid request body: expected a JSON object");
  EXPECT_EQ(ErrorOf("").rfind("Invalid request body: ", 0), 0u);
  EXPECT_EQ(ErrorOf("{\"code\":").rfind("Invalid request body: ", 0), 0u);
  EXPECT_EQ(ErrorOf("{\"code\":\"x\"} trailing").rfind("Invalid request body: ", 0), 0u);
  EXPECT_EQ(ErrorOf("{\"code\":\"\xff\"}").rfind("Invalid request body: ", 0), 0u);
}

TEST(ParseSessionCreateRequest, EmptyBodyMeansDefaults) {
  for (std::string_view body : {"", "  \n", "{}"}) {
    auto r = ParseSessionCreateRequest(body);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->ttl_seconds, 900);
    EXPECT_TRUE(r->files.empty());
  }
}

TEST(ParseSessionCreateRequest, TtlBoundsAndFiles) {
  auto r =
      ParseSessionCreateRequest(R"({"ttl_seconds":86400,"files":[{"path":"a","file_id":"b"}]})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->ttl_seconds, 86400);
  ASSERT_EQ(r->files.size(), 1u);
  EXPECT_EQ(r->files[0].file_id, "b");
  EXPECT_EQ(ParseSessionCreateRequest(R"({"ttl_seconds":1})")->ttl_seconds, 1);
  for (std::string_view bad : {R"({"ttl_seconds":0})", R"({"ttl_seconds":86401})",
                               R"({"ttl_seconds":1.5})", R"({"ttl_seconds":"9"})"}) {
    auto e = ParseSessionCreateRequest(bad);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().message(), "ttl_seconds must be an integer between 1 and 86400.");
  }
  EXPECT_FALSE(ParseSessionCreateRequest(R"({"files":[{"path":"a"}]})").ok());
  EXPECT_FALSE(ParseSessionCreateRequest("[1]").ok());
}

TEST(ParseBashRequest, FieldsAndErrors) {
  auto r = ParseBashRequest(R"({"cmd":"ls -l"})", 60000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->cmd, "ls -l");
  EXPECT_EQ(r->timeout_ms, 30000);
  EXPECT_EQ(ParseBashRequest(R"({"cmd":"x","timeout_ms":5})", 60000)->timeout_ms, 5);
  EXPECT_EQ(ParseBashRequest("{}", 60000).status().message(), "Field 'cmd' is required.");
  EXPECT_EQ(ParseBashRequest(R"({"cmd":1})", 60000).status().message(),
            "Field 'cmd' must be a string.");
  EXPECT_EQ(ParseBashRequest(R"({"cmd":"a\u0000b"})", 60000).status().message(),
            "Field 'cmd' must not contain NUL characters.");
  EXPECT_EQ(ParseBashRequest(R"({"cmd":"x","timeout_ms":60001})", 60000).status().message(),
            "timeout_ms exceeds maximum of 60000 ms");
}

TEST(ParseStageFilesRequest, FilesRequired) {
  EXPECT_EQ(ParseStageFilesRequest("{}").status().message(), "Field 'files' is required.");
  auto r = ParseStageFilesRequest(R"({"files":[{"path":"x/y","file_id":"z"}]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].path, "x/y");
}

TEST(ParseSolveRequest, DefaultsDependOnTheLanguage) {
  auto r = ParseSolveRequest(R"({"task":"add 2 and 2"})", 60000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->task, "add 2 and 2");
  EXPECT_EQ(r->language, "python");
  EXPECT_EQ(r->max_attempts, 3);
  EXPECT_EQ(r->timeout_ms, 10000);
  auto go = ParseSolveRequest(R"({"task":"t","language":"go","max_attempts":10})", 60000);
  ASSERT_TRUE(go.ok());
  EXPECT_EQ(go->timeout_ms, 20000);
  EXPECT_EQ(go->max_attempts, 10);
  // The default never exceeds what the daemon allows.
  EXPECT_EQ(ParseSolveRequest(R"({"task":"t","language":"go"})", 15000)->timeout_ms, 15000);
  EXPECT_EQ(ParseSolveRequest(R"({"task":"t","timeout_ms":5000})", 60000)->timeout_ms, 5000);
}

TEST(ParseSolveRequest, Errors) {
  auto message = [](const char* body) { return ParseSolveRequest(body, 60000).status().message(); };
  EXPECT_EQ(message("{}"), "Field 'task' is required.");
  EXPECT_EQ(message(R"({"task":5})"), "Field 'task' must be a string.");
  EXPECT_EQ(message(R"({"task":" \n"})"), "Field 'task' must not be empty.");
  EXPECT_EQ(message(R"({"task":"t","language":1})"), "Field 'language' must be a string.");
  for (const char* bad : {R"({"task":"t","max_attempts":0})", R"({"task":"t","max_attempts":11})",
                          R"({"task":"t","max_attempts":"3"})"}) {
    EXPECT_EQ(message(bad), "max_attempts must be an integer between 1 and 10.") << bad;
  }
  EXPECT_EQ(message(R"({"task":"t","timeout_ms":60001})"),
            "timeout_ms exceeds maximum of 60000 ms");
  EXPECT_EQ(message("[]"), "Invalid request body: expected a JSON object");
}

TEST(ParsePauseAndForkAndSnapshot, DefaultsAndErrors) {
  EXPECT_TRUE(*ParsePauseRequest(""));
  EXPECT_TRUE(*ParsePauseRequest("{}"));
  EXPECT_FALSE(*ParsePauseRequest(R"({"memory":false})"));
  EXPECT_EQ(ParsePauseRequest(R"({"memory":"no"})").status().message(),
            "memory must be true or false.");
  EXPECT_EQ(ParseForkRequest("")->count, 1u);
  EXPECT_EQ(ParseForkRequest(R"({"count":3,"ttl_seconds":60})")->ttl_seconds, 60);
  for (const char* bad : {R"({"count":0})", R"({"count":17})", R"({"count":"2"})"}) {
    EXPECT_EQ(ParseForkRequest(bad).status().message(),
              "count must be an integer between 1 and 16.")
        << bad;
  }
  EXPECT_FALSE(ParseForkRequest(R"({"ttl_seconds":0})").ok());
  EXPECT_EQ(*ParseSnapshotRequest(R"({"name":"base"})"), "base");
  EXPECT_EQ(*ParseSnapshotRequest(""), "");
  EXPECT_FALSE(ParseSnapshotRequest(R"({"name":7})").ok());
  EXPECT_FALSE(ParseSnapshotRequest("{\"name\":\"" + std::string(129, 'n') + "\"}").ok());
  EXPECT_EQ(*ParseSessionCreateRequest(R"({"snapshot":"snap-1"})")->snapshot, "snap-1");
  EXPECT_FALSE(ParseSessionCreateRequest(R"({"snapshot":""})").ok());
}

}  // namespace
}  // namespace ci::daemon
