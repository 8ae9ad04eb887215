// The OpenAI chat completions wire format: the request body for a whole conversation and the
// answers (text, tool calls, usage, and what is not an answer).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <variant>

#include "llm/openai_provider.h"
#include "model_result.h"
#include "same_json.h"

namespace ci::llm {
namespace {

using test_support::ExpectMalformed;
using test_support::ExpectReply;
using test_support::kCodeParameters;
using test_support::SameJson;
using ::testing::HasSubstr;

std::vector<Message> Conversation() {
  return {
      {Message::Role::kSystem, "You write programs.", {}, {}, {}},
      {Message::Role::kUser, "What is 2+2?", {}, {}, {}},
      {Message::Role::kAssistant,
       "",
       {{"call_abc", "execute_code", R"({"code":"print(2+2)\n"})"}},
       {},
       {}},
      {Message::Role::kTool, R"({"stdout":"4\n","exit_code":0})", {}, "call_abc", "execute_code"},
      {Message::Role::kAssistant, "It is 4.", {}, {}, {}},
  };
}

TEST(OpenAiWire, RequestBodyForAWholeConversation) {
  const std::vector<ToolDeclaration> tools = {{"execute_code", "Runs a program.", kCodeParameters}};
  EXPECT_TRUE(SameJson(OpenAiRequestBody("gpt-4o", Conversation(), tools), R"({
    "model": "gpt-4o",
    "messages": [
      {"role": "system", "content": "You write programs."},
      {"role": "user", "content": "What is 2+2?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_abc", "type": "function",
         "function": {"name": "execute_code", "arguments": "{\"code\":\"print(2+2)\\n\"}"}}]},
      {"role": "tool", "tool_call_id": "call_abc",
       "content": "{\"stdout\":\"4\\n\",\"exit_code\":0}"},
      {"role": "assistant", "content": "It is 4."}
    ],
    "tools": [{"type": "function", "function": {
      "name": "execute_code", "description": "Runs a program.",
      "parameters": {"type": "object", "properties": {"code": {"type": "string"}},
                     "required": ["code"]}}}]
  })"));
}

TEST(OpenAiWire, NoToolsNoToolsFieldAndAnEmptyTurnIsAnEmptyString) {
  const std::vector<Message> conversation = {{Message::Role::kUser, "hi", {}, {}, {}},
                                             {Message::Role::kAssistant, "", {}, {}, {}}};
  EXPECT_TRUE(SameJson(OpenAiRequestBody("m", conversation, {}), R"({"model": "m", "messages": [
    {"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]})"));
}

TEST(OpenAiWire, ParsesTextAndUsage) {
  Reply r = ExpectReply(ParseOpenAiAnswer(R"({
    "id": "chatcmpl-1", "object": "chat.completion",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "It is 4."}}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}})"));
  EXPECT_EQ(r.message.role, Message::Role::kAssistant);
  EXPECT_EQ(r.message.text, "It is 4.");
  EXPECT_TRUE(r.message.tool_calls.empty());
  EXPECT_EQ(r.usage.prompt_tokens, 12);
  EXPECT_EQ(r.usage.completion_tokens, 5);
}

TEST(OpenAiWire, ParsesToolCallsWithNullContentAndNoUsage) {
  Reply r = ExpectReply(ParseOpenAiAnswer(R"({"choices": [{"message": {
    "role": "assistant", "content": null, "tool_calls": [
      {"id": "call_1", "type": "function",
       "function": {"name": "execute_code", "arguments": "{\"code\": \"print(1)\\n\"}"}},
      {"id": "call_2", "type": "function",
       "function": {"name": "solve_task", "arguments": {"detailedDescription": "x"}}}]}}]})"));
  EXPECT_EQ(r.message.text, "");
  ASSERT_EQ(r.message.tool_calls.size(), 2u);
  EXPECT_EQ(r.message.tool_calls[0].id, "call_1");
  EXPECT_EQ(r.message.tool_calls[0].name, "execute_code");
  EXPECT_TRUE(SameJson(r.message.tool_calls[0].arguments_json, R"({"code": "print(1)\n"})"));
  EXPECT_EQ(r.message.tool_calls[1].id, "call_2");
  EXPECT_TRUE(SameJson(r.message.tool_calls[1].arguments_json, R"({"detailedDescription": "x"})"));
  EXPECT_EQ(r.usage.prompt_tokens, 0);
  EXPECT_EQ(r.usage.completion_tokens, 0);
}

TEST(OpenAiWire, MalformedAnswersSayWhatIsMissing) {
  EXPECT_THAT(ExpectMalformed(ParseOpenAiAnswer("<html>")).message, HasSubstr("not JSON"));
  EXPECT_THAT(ExpectMalformed(ParseOpenAiAnswer("[1]")).message, HasSubstr("not a JSON object"));
  EXPECT_THAT(ExpectMalformed(ParseOpenAiAnswer("{}")).message, HasSubstr("no choices"));
  EXPECT_THAT(ExpectMalformed(ParseOpenAiAnswer(R"({"choices": []})")).message,
              HasSubstr("no choices"));
  EXPECT_THAT(ExpectMalformed(ParseOpenAiAnswer(R"({"choices": [{"index": 0}]})")).message,
              HasSubstr("choices[0] has no message"));
  EXPECT_THAT(
      ExpectMalformed(ParseOpenAiAnswer(R"({"choices": [{"message": {"content": 5}}]})")).message,
      HasSubstr("content"));
  const std::string bad_arguments = ExpectMalformed(ParseOpenAiAnswer(R"({"choices": [{"message": {
    "tool_calls": [{"id": "c", "type": "function",
                    "function": {"name": "execute_code", "arguments": "{\"code\": "}}]}}]})"))
                                        .message;
  EXPECT_THAT(bad_arguments, HasSubstr("execute_code"));
  EXPECT_THAT(bad_arguments, HasSubstr("not a JSON object"));
  EXPECT_THAT(ExpectMalformed(ParseOpenAiAnswer(R"({"choices": [{"message": {
    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "[1, 2]"}}]}}]})"))
                  .message,
              HasSubstr("not a JSON object"));
  EXPECT_THAT(ExpectMalformed(ParseOpenAiAnswer(R"({"choices": [{"message": {
    "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}}]})"))
                  .message,
              HasSubstr("has no name"));
  EXPECT_THAT(ExpectMalformed(ParseOpenAiAnswer(R"({"choices": [{"message": {"tool_calls": 3}}]})"))
                  .message,
              HasSubstr("tool_calls"));
}

TEST(OpenAiWire, MessagesNameTheProvider) {
  EXPECT_THAT(ExpectMalformed(ParseOpenAiAnswer("{}")).message, HasSubstr("openai"));
}

}  // namespace
}  // namespace ci::llm
