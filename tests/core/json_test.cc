#include "core/json.h"

#include <gtest/gtest.h>

namespace ci::json {
namespace {

struct Sample {
  std::string name;
  uint32_t count = 0;
  int64_t offset = 0;
  bool flag = false;
  std::vector<std::string> words;
  std::string blob;
  uint64_t extra = 7;
};
template <typename V, Message<Sample> M>
void Fields(V& v, M& m) {
  v("name", m.name);
  v("count", m.count);
  v("offset", m.offset);
  v("flag", m.flag);
  v("words", m.words);
  v("blob", Hex(m.blob));
  v.Optional("extra", m.extra);
}

TEST(FieldTable, RoundTripsEveryKindOfField) {
  Sample in{"a\"b", 42, -5, true, {"x", "y z"}, std::string("\0\xff\x01", 3), 9};
  std::string text = Encode(in);
  EXPECT_NE(text.find("\"blob\":\"00ff01\""), std::string::npos) << text;
  Sample out;
  ASSERT_TRUE(Decode(text, &out)) << text;
  EXPECT_EQ(out.name, in.name);
  EXPECT_EQ(out.count, in.count);
  EXPECT_EQ(out.offset, in.offset);
  EXPECT_EQ(out.flag, in.flag);
  EXPECT_EQ(out.words, in.words);
  EXPECT_EQ(out.blob, in.blob);
  EXPECT_EQ(out.extra, in.extra);
}

TEST(FieldTable, AnOptionalFieldMayBeAbsent) {
  Sample out;
  ASSERT_TRUE(
      Decode(R"({"name":"n","count":1,"offset":0,"flag":false,"words":[],"blob":""})", &out));
  EXPECT_EQ(out.extra, 7u);
}

TEST(FieldTable, RefusesMissingFieldsWrongTypesAndBadInput) {
  Sample out;
  EXPECT_FALSE(Decode(R"({"count":1,"offset":0,"flag":false,"words":[],"blob":""})", &out));
  EXPECT_FALSE(
      Decode(R"({"name":1,"count":1,"offset":0,"flag":false,"words":[],"blob":""})", &out));
  EXPECT_FALSE(Decode(
      R"({"name":"n","count":4294967296,"offset":0,"flag":false,"words":[],"blob":""})", &out));
  EXPECT_FALSE(
      Decode(R"({"name":"n","count":1,"offset":0,"flag":false,"words":[1],"blob":""})", &out));
  EXPECT_FALSE(
      Decode(R"({"name":"n","count":1,"offset":0,"flag":false,"words":[],"blob":"0g"})", &out));
  EXPECT_FALSE(Decode(
      R"({"name":"n","count":1,"offset":0,"flag":false,"words":[],"blob":"","extra":"x"})", &out));
  EXPECT_FALSE(Decode("[]", &out));
  EXPECT_FALSE(Decode("{", &out));
}

std::string Nested(size_t depth, std::string_view open = "[", std::string_view close = "]") {
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += open;
  for (size_t i = 0; i < depth; ++i) s += close;
  return s;
}

TEST(JsonDepth, NestingIsBoundedWhereverTheTextComesFrom) {
  rapidjson::Document doc;
  std::string why;
  EXPECT_TRUE(ParseJson(Nested(kMaxJsonDepth), doc, why)) << why;
  EXPECT_FALSE(ParseJson(Nested(kMaxJsonDepth + 1), doc, why));
  EXPECT_EQ(why, "arrays and objects nested deeper than 128 levels");
  // The crash of issue 30: 200,000 arrays (a 400 KB body) in a tool call's arguments.
  EXPECT_FALSE(ParseJson(R"({"arguments":)" + Nested(200000) + "}", doc, why));
  std::string objects;
  for (size_t i = 0; i <= kMaxJsonDepth; ++i) objects += R"({"a":)";
  objects += "1" + std::string(kMaxJsonDepth + 1, '}');
  EXPECT_FALSE(ParseJson(objects, doc, why));
  // Brackets inside strings, escaped quotes included, are not nesting.
  const std::string in_strings = R"(["\"[[[[", "\\", ")" + std::string(1000, '[') + R"("])";
  EXPECT_TRUE(ParseJson(in_strings, doc, why)) << why;
  EXPECT_TRUE(doc.IsArray() && doc.Size() == 3);
  // Wide is fine: only depth is bounded.
  std::string wide = "[";
  for (int i = 0; i < 100000; ++i) wide += i ? ",[[1]]" : "[[1]]";
  EXPECT_TRUE(ParseJson(wide + "]", doc, why)) << why;
  // The frames between the daemon and its agents (json::Decode) are bounded the same way.
  Sample out;
  EXPECT_FALSE(Decode(R"({"name":"n","count":1,"offset":0,"flag":false,"words":)" + Nested(200000) +
                          R"(,"blob":""})",
                      &out));
}

}  // namespace
}  // namespace ci::json
