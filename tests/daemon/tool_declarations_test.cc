#include "daemon/tools/tool_declarations.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "core/json.h"

namespace ci::daemon {
namespace {

const std::vector<Language> kLanguages = {{"python", "/usr/bin/python3", "3.11.2"},
                                          {"go", "/usr/bin/go", "1.19.8", "version"}};

rapidjson::Document Parse(const std::string& text) {
  rapidjson::Document doc;
  std::string why;
  EXPECT_TRUE(ParseJson(text, doc, why)) << why << ": " << text;
  return doc;
}

TEST(ToolDeclarations, ExecuteCodeSaysWhatTheSandboxHasAndHasNot) {
  Config config;
  config.memory_limit_mb = 321;
  config.max_exec_timeout_ms = 45000;
  llm::ToolDeclaration d = ExecuteCodeDeclaration(kLanguages, config);
  EXPECT_EQ(d.name, "execute_code");
  EXPECT_NE(d.description.find("no network"), std::string::npos);
  EXPECT_NE(d.description.find("numpy"), std::string::npos);
  EXPECT_NE(d.description.find("321 MB"), std::string::npos);
  EXPECT_NE(d.description.find("python 3.11.2, go 1.19.8"), std::string::npos);
  auto schema = Parse(d.parameters_json);
  EXPECT_STREQ(schema["type"].GetString(), "object");
  EXPECT_STREQ(schema["required"][0].GetString(), "code");
  const auto& props = schema["properties"];
  for (const char* p : {"code", "language", "stdin", "timeout_ms"}) {
    EXPECT_TRUE(props.HasMember(p)) << p;
  }
  EXPECT_EQ(props["language"]["enum"].Size(), 2u);
  EXPECT_STREQ(props["language"]["enum"][1].GetString(), "go");
  EXPECT_NE(std::string(props["timeout_ms"]["description"].GetString()).find("45000"),
            std::string::npos);
}

TEST(ToolDeclarations, SolveTaskTakesADetailedDescription) {
  llm::ToolDeclaration d = SolveTaskDeclaration(kLanguages, Config{});
  EXPECT_EQ(d.name, "solve_task");
  auto schema = Parse(d.parameters_json);
  EXPECT_STREQ(schema["required"][0].GetString(), "detailedDescription");
  EXPECT_STREQ(schema["properties"]["detailedDescription"]["type"].GetString(), "string");
}

TEST(ToolsJson, OpenAiFormatIsTheChatCompletionsToolsArray) {
  std::vector<llm::ToolDeclaration> tools{ExecuteCodeDeclaration(kLanguages, Config{}),
                                          SolveTaskDeclaration(kLanguages, Config{})};
  auto doc = Parse(ToolsJson(ToolFormat::kOpenAi, tools));
  EXPECT_STREQ(doc["format"].GetString(), "openai");
  ASSERT_EQ(doc["tools"].Size(), 2u);
  const auto& first = doc["tools"][0];
  EXPECT_STREQ(first["type"].GetString(), "function");
  EXPECT_STREQ(first["function"]["name"].GetString(), "execute_code");
  EXPECT_STREQ(first["function"]["parameters"]["properties"]["code"]["type"].GetString(), "string");
  EXPECT_STREQ(doc["tools"][1]["function"]["name"].GetString(), "solve_task");
}

TEST(ToolsJson, GeminiFormatIsFunctionDeclarationsWithUppercaseTypes) {
  std::vector<llm::ToolDeclaration> tools{ExecuteCodeDeclaration(kLanguages, Config{})};
  auto doc = Parse(ToolsJson(ToolFormat::kGemini, tools));
  EXPECT_STREQ(doc["format"].GetString(), "gemini");
  ASSERT_EQ(doc["tools"].Size(), 1u);
  const auto& decl = doc["tools"][0]["functionDeclarations"][0];
  EXPECT_STREQ(decl["name"].GetString(), "execute_code");
  EXPECT_STREQ(decl["parameters"]["type"].GetString(), "OBJECT");
  EXPECT_STREQ(decl["parameters"]["properties"]["timeout_ms"]["type"].GetString(), "INTEGER");
  EXPECT_STREQ(decl["parameters"]["properties"]["code"]["type"].GetString(), "STRING");
}

TEST(ParseToolFormat, KnowsTwoNames) {
  EXPECT_EQ(ParseToolFormat("openai"), ToolFormat::kOpenAi);
  EXPECT_EQ(ParseToolFormat("gemini"), ToolFormat::kGemini);
  EXPECT_EQ(ParseToolFormat("OpenAI"), std::nullopt);
  EXPECT_EQ(ParseToolFormat(""), std::nullopt);
}

}  // namespace
}  // namespace ci::daemon
