#include "llm/gemini_provider.h"

#include <utility>

#include "core/json.h"
#include "llm/answer_fields.h"
#include "llm/gemini_schema.h"
#include "llm/model_call.h"

namespace ci::llm {
namespace {

using rapidjson::Value;

bool HasString(const Value& o, const char* name) {
  return o.IsObject() && o.HasMember(name) && o[name].IsString();
}

// `text` as a JSON object value; anything else wrapped as {"<key>": text}: Gemini takes only
// objects for a call's args and a function's response.
void WriteObject(JsonWriter& w, std::string_view text, const char* key) {
  rapidjson::Document d;
  std::string why;
  if (ParseJson(text, d, why) && d.IsObject()) {
    d.Accept(w);
    return;
  }
  w.StartObject();
  WriteField(w, key, text);
  w.EndObject();
}

void WriteTextPart(JsonWriter& w, std::string_view text) {
  w.StartObject();
  WriteField(w, "text", text);
  w.EndObject();
}

void WriteModelTurn(JsonWriter& w, const Message& m) {
  w.StartObject();
  WriteField(w, "role", "model");
  w.Key("parts");
  w.StartArray();
  // A content needs at least one part: an empty text when the turn had neither.
  if (!m.text.empty() || m.tool_calls.empty()) WriteTextPart(w, m.text);
  for (const ToolCall& call : m.tool_calls) {
    w.StartObject();
    w.Key("functionCall");
    w.StartObject();
    WriteField(w, "name", call.name);
    w.Key("args");
    WriteObject(w, call.arguments_json, "arguments");
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

void WriteFunctionResponsePart(JsonWriter& w, const Message& m) {
  w.StartObject();
  w.Key("functionResponse");
  w.StartObject();
  WriteField(w, "name", m.tool_name);
  w.Key("response");
  WriteObject(w, m.text, "result");
  w.EndObject();
  w.EndObject();
}

void WriteContents(JsonWriter& w, const std::vector<Message>& conversation) {
  w.Key("contents");
  w.StartArray();
  bool in_tool_results = false;  // a "user" content of functionResponse parts is open
  for (const Message& m : conversation) {
    if (m.role == Message::Role::kSystem) continue;
    if (m.role == Message::Role::kTool) {
      if (!in_tool_results) {
        w.StartObject();
        WriteField(w, "role", "user");
        w.Key("parts");
        w.StartArray();
        in_tool_results = true;
      }
      WriteFunctionResponsePart(w, m);
      continue;
    }
    if (in_tool_results) {
      w.EndArray();
      w.EndObject();
      in_tool_results = false;
    }
    if (m.role == Message::Role::kAssistant) {
      WriteModelTurn(w, m);
      continue;
    }
    w.StartObject();
    WriteField(w, "role", "user");
    w.Key("parts");
    w.StartArray();
    WriteTextPart(w, m.text);
    w.EndArray();
    w.EndObject();
  }
  if (in_tool_results) {
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
}

void WriteSystemInstruction(JsonWriter& w, const std::vector<Message>& conversation) {
  bool open = false;
  for (const Message& m : conversation) {
    if (m.role != Message::Role::kSystem) continue;
    if (!open) {
      w.Key("systemInstruction");
      w.StartObject();
      w.Key("parts");
      w.StartArray();
      open = true;
    }
    WriteTextPart(w, m.text);
  }
  if (open) {
    w.EndArray();
    w.EndObject();
  }
}

void WriteTools(JsonWriter& w, const std::vector<ToolDeclaration>& tools) {
  if (tools.empty()) return;
  w.Key("tools");
  w.StartArray();
  w.StartObject();
  w.Key("functionDeclarations");
  w.StartArray();
  for (const ToolDeclaration& t : tools) {
    w.StartObject();
    WriteField(w, "name", t.name);
    WriteField(w, "description", t.description);
    const std::string parameters = GeminiSchema(t.parameters_json);
    w.Key("parameters");
    w.RawValue(parameters.data(), parameters.size(), rapidjson::kObjectType);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.EndArray();
}

// A functionCall part as a ToolCall, or why it is not one.
std::variant<ToolCall, ModelError> ReadFunctionCall(const Value& call, size_t number) {
  if (!HasString(call, "name")) return Malformed("gemini", "a functionCall part has no name");
  ToolCall out;
  out.name = Text(call["name"]);
  out.id = HasString(call, "id") ? Text(call["id"]) : "call_" + std::to_string(number);
  if (!call.HasMember("args")) {
    out.arguments_json = "{}";
  } else if (call["args"].IsObject()) {
    out.arguments_json = JsonText([&](JsonWriter& w) { call["args"].Accept(w); });
  } else {
    return Malformed("gemini", "functionCall " + out.name + ": args is not an object");
  }
  return out;
}

class GeminiProvider final : public Provider {
 public:
  GeminiProvider(boost::asio::any_io_executor ex, const LlmConfig& config)
      : ex_(std::move(ex)), model_(config.model) {
    endpoint_.provider = "gemini";
    // Google's SDKs take "models/gemini-2.0-flash" as well as the bare name.
    std::string_view model = config.model;
    if (model.rfind("models/", 0) == 0) model.remove_prefix(7);
    endpoint_.url =
        ParseUrl(config.base_url + "/models/" + std::string(model) + ":generateContent");
    if (!config.api_key.empty()) endpoint_.headers.push_back({"x-goog-api-key", config.api_key});
    endpoint_.api_key = config.api_key;
    endpoint_.timeout = config.timeout;
  }

  std::string_view name() const override { return "gemini"; }
  const std::string& model() const override { return model_; }

  boost::asio::awaitable<ModelResult> Complete(const std::vector<Message>& conversation,
                                               const std::vector<ToolDeclaration>& tools) override {
    const std::string body = GeminiRequestBody(conversation, tools);
    co_return co_await CallModel(ex_, endpoint_, body, &ParseGeminiAnswer);
  }

 private:
  boost::asio::any_io_executor ex_;
  std::string model_;
  ModelEndpoint endpoint_;
};

}  // namespace

std::string GeminiRequestBody(const std::vector<Message>& conversation,
                              const std::vector<ToolDeclaration>& tools) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteContents(w, conversation);
    WriteSystemInstruction(w, conversation);
    WriteTools(w, tools);
    w.EndObject();
  });
}

ModelResult ParseGeminiAnswer(std::string_view body) {
  rapidjson::Document d;
  std::string why;
  if (!ParseJson(body, d, why)) return Malformed("gemini", "not JSON (" + why + ")");
  if (!d.IsObject()) return Malformed("gemini", "not a JSON object");
  if (d.HasMember("promptFeedback") && HasString(d["promptFeedback"], "blockReason")) {
    return Malformed("gemini", "the prompt was blocked (blockReason " +
                                   Text(d["promptFeedback"]["blockReason"]) + ")");
  }
  if (!d.HasMember("candidates") || !d["candidates"].IsArray() || d["candidates"].Empty()) {
    return Malformed("gemini", "no candidates");
  }
  const Value& candidate = d["candidates"][0];
  const std::string finish_reason =
      HasString(candidate, "finishReason") ? Text(candidate["finishReason"]) : "none";
  if (!candidate.IsObject() || !candidate.HasMember("content") ||
      !candidate["content"].IsObject() || !candidate["content"].HasMember("parts") ||
      !candidate["content"]["parts"].IsArray() || candidate["content"]["parts"].Empty()) {
    return Malformed("gemini", "candidates[0] has no content (finishReason " + finish_reason + ")");
  }

  Reply reply;
  reply.message.role = Message::Role::kAssistant;
  for (const Value& part : candidate["content"]["parts"].GetArray()) {
    if (!part.IsObject())
      return Malformed("gemini", "candidates[0].content.parts holds a non-object");
    // A thinking model's thought summaries are not the answer.
    const bool thought =
        part.HasMember("thought") && part["thought"].IsBool() && part["thought"].GetBool();
    if (HasString(part, "text") && !thought) reply.message.text += Text(part["text"]);
    if (part.HasMember("functionCall")) {
      const size_t number = reply.message.tool_calls.size() + 1;
      auto call = ReadFunctionCall(part["functionCall"], number);
      if (auto* error = std::get_if<ModelError>(&call)) return std::move(*error);
      reply.message.tool_calls.push_back(std::move(std::get<ToolCall>(call)));
    }
  }
  if (d.HasMember("usageMetadata")) {
    reply.usage.prompt_tokens = TokenCount(d["usageMetadata"], "promptTokenCount");
    reply.usage.completion_tokens = TokenCount(d["usageMetadata"], "candidatesTokenCount");
  }
  return reply;
}

std::unique_ptr<Provider> MakeGeminiProvider(boost::asio::any_io_executor ex,
                                             const LlmConfig& config) {
  return std::make_unique<GeminiProvider>(std::move(ex), config);
}

}  // namespace ci::llm
