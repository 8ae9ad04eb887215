#include "k8s/yaml_tree.h"

#include <gtest/gtest.h>

#include <string>

namespace ci::k8s {
namespace {

using Kind = YamlNode::Kind;

TEST(YamlTree, MappingsSequencesAndScalarsWithTheirLines) {
  auto doc = ParseYaml(
      "apiVersion: v1\n"
      "clusters:\n"
      "- name: dev\n"
      "  cluster:\n"
      "    server: 'https://a:6443'\n"
      "    port: 6443\n"
      "preferences: {}\n");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  ASSERT_EQ(doc->kind, Kind::kMapping);
  ASSERT_NE(doc->Find("apiVersion"), nullptr);
  EXPECT_EQ(doc->Find("apiVersion")->scalar, "v1");
  const YamlNode* clusters = doc->Find("clusters");
  ASSERT_NE(clusters, nullptr);
  ASSERT_EQ(clusters->kind, Kind::kSequence);
  ASSERT_EQ(clusters->items.size(), 1u);
  const YamlNode* cluster = clusters->items[0].Find("cluster");
  ASSERT_NE(cluster, nullptr);
  EXPECT_EQ(cluster->Find("server")->scalar, "https://a:6443");
  EXPECT_EQ(cluster->Find("server")->line, 5);
  EXPECT_EQ(cluster->Find("port")->scalar, "6443");  // types are the reader's business
  EXPECT_EQ(doc->Find("preferences")->kind, Kind::kMapping);
  EXPECT_EQ(doc->Find("missing"), nullptr);
}

TEST(YamlTree, PlainNullsAreNullQuotedOnesAreStrings) {
  auto doc = ParseYaml("a: null\nb: ~\nc:\nd: \"null\"\ne: ''\n");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ(doc->Find("a"), nullptr);
  EXPECT_EQ(doc->Find("b"), nullptr);
  EXPECT_EQ(doc->Find("c"), nullptr);
  ASSERT_NE(doc->Find("d"), nullptr);
  EXPECT_EQ(doc->Find("d")->scalar, "null");
  ASSERT_NE(doc->Find("e"), nullptr);
  EXPECT_EQ(doc->Find("e")->scalar, "");
}

TEST(YamlTree, JsonIsYaml) {
  auto doc = ParseYaml(R"({"kind": "Config", "users": [{"name": "u", "user": {"token": "t"}}]})");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ(doc->Find("users")->items[0].Find("user")->Find("token")->scalar, "t");
}

TEST(YamlTree, EmptyStreamIsNull) {
  auto doc = ParseYaml("");
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(doc->kind, Kind::kNull);
}

TEST(YamlTree, SyntaxErrorNamesTheLine) {
  auto doc = ParseYaml("a: 1\nb: [1, 2\nc: 3\n");
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("line "), std::string::npos) << doc.status().message();
}

TEST(YamlTree, AliasesAreExpandedWithinABudget) {
  auto small = ParseYaml("base: &b {token: t}\nuser: *b\n");
  ASSERT_TRUE(small.ok()) << small.status().message();
  EXPECT_EQ(small->Find("user")->Find("token")->scalar, "t");

  // Nine levels of ten aliases each: 10^9 nodes if expanded without a bound.
  std::string bomb = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    std::string prev = "*l" + std::to_string(i - 1);
    const std::string n = std::to_string(i);
    bomb += "l" + n + ": &l" + n + " [";
    for (int j = 0; j < 10; ++j) bomb += prev + (j < 9 ? ", " : "");
    bomb += "]\n";
  }
  auto doc = ParseYaml(bomb);
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("nodes"), std::string::npos) << doc.status().message();
}

TEST(YamlTree, NonStringKeysAreRefused) {
  auto doc = ParseYaml("? [a, b]\n: c\n");
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("mapping key"), std::string::npos);
}

}  // namespace
}  // namespace ci::k8s
