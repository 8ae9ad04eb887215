// Gemini's generateContent wire format: the request body for a whole conversation (roles,
// functionCall and functionResponse parts, the system instruction, the schema) and the answers
// (text, function calls, usage, blocked prompts, empty candidates).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <variant>

#include "llm/gemini_provider.h"
#include "model_result.h"
#include "same_json.h"

namespace ci::llm {
namespace {

using test_support::ExpectReply;
using test_support::kCodeParameters;
using test_support::SameJson;
using ::testing::HasSubstr;

// The message of a malformed-answer error.
std::string MalformedMessage(const ModelResult& r) {
  return test_support::ExpectMalformed(r).message;
}

TEST(GeminiWire, RequestBodyForAWholeConversation) {
  const std::vector<Message> conversation = {
      {Message::Role::kSystem, "You write programs.", {}, {}, {}},
      {Message::Role::kUser, "What are 2+2 and 3*3?", {}, {}, {}},
      {Message::Role::kAssistant,
       "Let me run both.",
       {{"call_1", "execute_code", R"({"code":"print(2+2)\n"})"},
        {"call_2", "execute_code", R"({"code":"print(3*3)\n"})"}},
       {},
       {}},
      {Message::Role::kTool, R"({"stdout":"4\n"})", {}, "call_1", "execute_code"},
      {Message::Role::kTool, R"({"stdout":"9\n"})", {}, "call_2", "execute_code"},
      {Message::Role::kAssistant, "4 and 9.", {}, {}, {}},
      {Message::Role::kUser, "Thanks.", {}, {}, {}},
  };
  const std::vector<ToolDeclaration> tools = {{"execute_code", "Runs a program.", kCodeParameters}};
  EXPECT_TRUE(SameJson(GeminiRequestBody(conversation, tools), R"({
    "systemInstruction": {"parts": [{"text": "You write programs."}]},
    "contents": [
      {"role": "user", "parts": [{"text": "What are 2+2 and 3*3?"}]},
      {"role": "model", "parts": [
        {"text": "Let me run both."},
        {"functionCall": {"name": "execute_code", "args": {"code": "print(2+2)\n"}}},
        {"functionCall": {"name": "execute_code", "args": {"code": "print(3*3)\n"}}}]},
      {"role": "user", "parts": [
        {"functionResponse": {"name": "execute_code", "response": {"stdout": "4\n"}}},
        {"functionResponse": {"name": "execute_code", "response": {"stdout": "9\n"}}}]},
      {"role": "model", "parts": [{"text": "4 and 9."}]},
      {"role": "user", "parts": [{"text": "Thanks."}]}
    ],
    "tools": [{"functionDeclarations": [{
      "name": "execute_code", "description": "Runs a program.",
      "parameters": {"type": "OBJECT", "properties": {"code": {"type": "STRING"}},
                     "required": ["code"]}}]}]
  })"));
}

TEST(GeminiWire, NoSystemNoToolsAndAToolOnlyTurn) {
  const std::vector<Message> conversation = {
      {Message::Role::kUser, "go", {}, {}, {}},
      {Message::Role::kAssistant, "", {{"call_1", "solve_task", "{}"}}, {}, {}},
      {Message::Role::kTool, "not an object", {}, "call_1", "solve_task"},
  };
  EXPECT_TRUE(SameJson(GeminiRequestBody(conversation, {}), R"({"contents": [
    {"role": "user", "parts": [{"text": "go"}]},
    {"role": "model", "parts": [{"functionCall": {"name": "solve_task", "args": {}}}]},
    {"role": "user", "parts": [{"functionResponse": {"name": "solve_task",
                                                     "response": {"result": "not an object"}}}]}
  ]})"));
}

TEST(GeminiWire, ParsesTextPartsAndUsage) {
  Reply r = ExpectReply(ParseGeminiAnswer(R"({
    "candidates": [{"content": {"role": "model", "parts": [
      {"text": "thinking...", "thought": true}, {"text": "It is "}, {"text": "4."}]},
      "finishReason": "STOP"}],
    "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 7, "totalTokenCount": 37}
  })"));
  EXPECT_EQ(r.message.role, Message::Role::kAssistant);
  EXPECT_EQ(r.message.text, "It is 4.");
  EXPECT_TRUE(r.message.tool_calls.empty());
  EXPECT_EQ(r.usage.prompt_tokens, 30);
  EXPECT_EQ(r.usage.completion_tokens, 7);
}

TEST(GeminiWire, ParsesFunctionCallsWithMadeUpIds) {
  Reply r = ExpectReply(ParseGeminiAnswer(R"({"candidates": [{"content": {"parts": [
    {"text": "Running."},
    {"functionCall": {"name": "execute_code", "args": {"code": "print(1)\n"}}},
    {"functionCall": {"name": "solve_task"}}]}}]})"));
  EXPECT_EQ(r.message.text, "Running.");
  ASSERT_EQ(r.message.tool_calls.size(), 2u);
  EXPECT_EQ(r.message.tool_calls[0].id, "call_1");
  EXPECT_EQ(r.message.tool_calls[0].name, "execute_code");
  EXPECT_TRUE(SameJson(r.message.tool_calls[0].arguments_json, R"({"code": "print(1)\n"})"));
  EXPECT_EQ(r.message.tool_calls[1].id, "call_2");
  EXPECT_EQ(r.message.tool_calls[1].name, "solve_task");
  EXPECT_EQ(r.message.tool_calls[1].arguments_json, "{}");
  EXPECT_EQ(r.usage.prompt_tokens, 0);
}

TEST(GeminiWire, BlockedAndEmptyAnswersNameTheReason) {
  std::string e = MalformedMessage(ParseGeminiAnswer(
      R"({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {}})"));
  EXPECT_THAT(e, HasSubstr("blocked"));
  EXPECT_THAT(e, HasSubstr("PROHIBITED_CONTENT"));
  e = MalformedMessage(
      ParseGeminiAnswer(R"({"candidates": [{"finishReason": "SAFETY", "safetyRatings": []}]})"));
  EXPECT_THAT(e, HasSubstr("no content"));
  EXPECT_THAT(e, HasSubstr("SAFETY"));
  e = MalformedMessage(ParseGeminiAnswer(
      R"({"candidates": [{"content": {"parts": []}, "finishReason": "RECITATION"}]})"));
  EXPECT_THAT(e, HasSubstr("RECITATION"));
}

TEST(GeminiWire, MalformedAnswersSayWhatIsMissing) {
  EXPECT_THAT(MalformedMessage(ParseGeminiAnswer("not json")), HasSubstr("not JSON"));
  EXPECT_THAT(MalformedMessage(ParseGeminiAnswer("{}")), HasSubstr("no candidates"));
  EXPECT_THAT(MalformedMessage(ParseGeminiAnswer(R"({"candidates": []})")),
              HasSubstr("no candidates"));
  EXPECT_THAT(MalformedMessage(ParseGeminiAnswer(
                  R"({"candidates": [{"content": {"parts": [{"functionCall": {}}]}}]})")),
              HasSubstr("no name"));
  EXPECT_THAT(MalformedMessage(ParseGeminiAnswer(R"({"candidates": [{"content": {"parts": [
                  {"functionCall": {"name": "f", "args": "x"}}]}}]})")),
              HasSubstr("args"));
  EXPECT_THAT(MalformedMessage(ParseGeminiAnswer("{}")), HasSubstr("gemini"));
}

}  // namespace
}  // namespace ci::llm
