#include "daemon/sessions/python_state.h"

#include <gtest/gtest.h>

#include "core/json.h"

namespace ci::daemon {
namespace {

TEST(PythonState, RequestIsWhatTheServerReads) {
  rapidjson::Document doc;
  std::string why;
  ASSERT_TRUE(ParseJson(PythonStateRequest("dump", "/tmp/s \"1\"", 2500), doc, why)) << why;
  EXPECT_STREQ(doc["op"].GetString(), "dump");
  EXPECT_STREQ(doc["path"].GetString(), "/tmp/s \"1\"");
  EXPECT_EQ(doc["timeout_ms"].GetInt64(), 2500);
  EXPECT_FALSE(doc.HasMember("code"));  // the server takes a request with an op for no cell
}

TEST(PythonState, ParsesADumpReportFromTheLastLine) {
  auto r = ParsePythonStateReport(
      "printed by a __reduce__\n"
      "{\"kept\": [\"np\", \"x\"], \"lost\": [{\"name\": \"s\", \"why\": \"cannot pickle "
      "'socket' object\"}], \"bytes\": 52428931}\n\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->kept, (std::vector<std::string>{"np", "x"}));
  ASSERT_EQ(r->lost.size(), 1u);
  EXPECT_EQ(r->lost[0].first, "s");
  EXPECT_EQ(r->lost[0].second, "cannot pickle 'socket' object");
  EXPECT_EQ(r->bytes, 52428931u);
  EXPECT_TRUE(r->error.empty());
}

TEST(PythonState, ParsesALoadReportAndAnError) {
  auto load = ParsePythonStateReport("{\"kept\": [], \"lost\": []}");
  ASSERT_TRUE(load.ok()) << load.status().message();
  EXPECT_TRUE(load->kept.empty() && load->lost.empty() && load->error.empty());
  EXPECT_EQ(load->bytes, 0u);
  auto error = ParsePythonStateReport("{\"error\": \"truncated: 10 bytes of 99\"}\n");
  ASSERT_TRUE(error.ok()) << error.status().message();
  EXPECT_EQ(error->error, "truncated: 10 bytes of 99");
}

TEST(PythonState, AnythingElseIsAClearError) {
  for (std::string_view text :
       {"", "\n \n", "not json", "[1]", "{\"kept\": []}", "{\"lost\": []}",
        "{\"kept\": [1], \"lost\": []}", "{\"kept\": [], \"lost\": [\"s\"]}",
        "{\"kept\": [], \"lost\": [{\"name\": \"s\"}]}",
        "{\"kept\": [], \"lost\": [], \"bytes\": -1}", "{\"error\": 3}",
        "{\"kept\": [], \"lost\": []}\ntrailing words"}) {
    auto r = ParsePythonStateReport(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find("state answer"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace ci::daemon
