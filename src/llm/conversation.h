// A conversation with a chat model, independent of any provider's wire format: what the agent
// loop and `code-interpreter ask` build, and what each provider (provider.h) translates to its
// own request body and back.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace ci::llm {

// A model's request to call a function.
struct ToolCall {
  std::string id;              // OpenAI's call id; Gemini has none (the provider makes one up)
  std::string name;            // "solve_task"
  std::string arguments_json;  // a JSON object's text: {"detailedDescription": "..."}
};

struct Message {
  enum class Role { kSystem, kUser, kAssistant, kTool };
  Role role = Role::kUser;
  // kSystem, kUser, kAssistant: the text (an assistant's may be empty when it only calls tools).
  // kTool: the function's result, a JSON object's text.
  std::string text;
  std::vector<ToolCall> tool_calls;  // kAssistant: the calls it made
  std::string tool_call_id;          // kTool: the call this answers (ToolCall::id)
  std::string tool_name;             // kTool: that call's function name
};

// A function a model may call. `parameters_json` is a JSON Schema object in OpenAI's form
// (lowercase types); Gemini's form (uppercase types) is derived from it (gemini_schema.h).
struct ToolDeclaration {
  std::string name;
  std::string description;
  std::string parameters_json;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// One answer of the model: the assistant's message, what it cost, how long the request took.
struct Reply {
  Message message;  // role kAssistant
  Usage usage;
  std::chrono::milliseconds wall{0};
};

// Why there is no answer. The message names the provider and the problem and never holds the
// API key (the provider redacts it from anything the server echoed).
struct ModelError {
  enum class Kind {
    kUnavailable,  // connection refused, TLS failure, an HTTP error status: the API says 502
    kTimedOut,     // no whole answer within LLM_TIMEOUT_SEC: 504
    kMalformed,    // an answer that is not the wire format (no choices, bad JSON): 502
  };
  Kind kind = Kind::kUnavailable;
  std::string message;
  int http_status = 0;  // the provider's status when it answered one, else 0
};

using ModelResult = std::variant<Reply, ModelError>;

}  // namespace ci::llm
