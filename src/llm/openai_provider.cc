#include "llm/openai_provider.h"

#include <utility>

#include "core/json.h"
#include "llm/answer_fields.h"
#include "llm/model_call.h"

namespace ci::llm {
namespace {

using rapidjson::Value;

constexpr char kEmptyParameters[] = R"({"type":"object","properties":{}})";

const char* RoleName(Message::Role role) {
  switch (role) {
    case Message::Role::kSystem:
      return "system";
    case Message::Role::kUser:
      return "user";
    case Message::Role::kAssistant:
      return "assistant";
    case Message::Role::kTool:
      return "tool";
  }
  return "user";
}

bool IsJsonObject(std::string_view text) {
  rapidjson::Document d;
  std::string why;
  return ParseJson(text, d, why) && d.IsObject();
}

void WriteMessage(JsonWriter& w, const Message& m) {
  w.StartObject();
  WriteField(w, "role", RoleName(m.role));
  if (m.role == Message::Role::kTool) WriteField(w, "tool_call_id", m.tool_call_id);
  w.Key("content");
  // An assistant turn that only calls tools has no content: null, as OpenAI itself sends it
  // (OpenAI refuses a null content without tool_calls).
  if (m.role == Message::Role::kAssistant && m.text.empty() && !m.tool_calls.empty()) {
    w.Null();
  } else {
    WriteString(w, m.text);
  }
  if (m.role == Message::Role::kAssistant && !m.tool_calls.empty()) {
    w.Key("tool_calls");
    w.StartArray();
    for (const ToolCall& call : m.tool_calls) {
      w.StartObject();
      WriteField(w, "id", call.id);
      WriteField(w, "type", "function");
      w.Key("function");
      w.StartObject();
      WriteField(w, "name", call.name);
      WriteField(w, "arguments", call.arguments_json);  // a string holding JSON, by design
      w.EndObject();
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
}

void WriteTool(JsonWriter& w, const ToolDeclaration& t) {
  w.StartObject();
  WriteField(w, "type", "function");
  w.Key("function");
  w.StartObject();
  WriteField(w, "name", t.name);
  WriteField(w, "description", t.description);
  // The declarations are the daemon's own constants; one that is no JSON object must still
  // leave a valid request.
  const std::string_view parameters =
      IsJsonObject(t.parameters_json) ? std::string_view(t.parameters_json) : kEmptyParameters;
  w.Key("parameters");
  w.RawValue(parameters.data(), parameters.size(), rapidjson::kObjectType);
  w.EndObject();
  w.EndObject();
}

// One entry of message.tool_calls, or why it is not one.
std::variant<ToolCall, ModelError> ReadToolCall(const Value& v, size_t index) {
  const std::string where = "choices[0].message.tool_calls[" + std::to_string(index) + "]";
  if (!v.IsObject() || !v.HasMember("function") || !v["function"].IsObject()) {
    return Malformed("openai", where + " has no function");
  }
  const Value& f = v["function"];
  if (!f.HasMember("name") || !f["name"].IsString())
    return Malformed("openai", where + " has no name");
  ToolCall call;
  call.name = Text(f["name"]);
  call.id =
      v.HasMember("id") && v["id"].IsString() ? Text(v["id"]) : "call_" + std::to_string(index + 1);
  if (f.HasMember("arguments") && f["arguments"].IsString()) {
    call.arguments_json = Text(f["arguments"]);
  } else if (f.HasMember("arguments") && f["arguments"].IsObject()) {
    // Some OpenAI-compatible servers send the object itself instead of its text.
    call.arguments_json = JsonText([&](JsonWriter& w) { f["arguments"].Accept(w); });
  } else {
    return Malformed("openai", where + " (" + call.name + ") has no arguments");
  }
  if (!IsJsonObject(call.arguments_json)) {
    return Malformed("openai", where + " (" + call.name + "): the arguments are not a JSON object");
  }
  return call;
}

class OpenAiProvider final : public Provider {
 public:
  OpenAiProvider(boost::asio::any_io_executor ex, const LlmConfig& config)
      : ex_(std::move(ex)), model_(config.model) {
    endpoint_.provider = "openai";
    endpoint_.url = ParseUrl(config.base_url + "/chat/completions");
    if (!config.api_key.empty()) {
      endpoint_.headers.push_back({"Authorization", "Bearer " + config.api_key});
    }
    endpoint_.api_key = config.api_key;
    endpoint_.timeout = config.timeout;
  }

  std::string_view name() const override { return "openai"; }
  const std::string& model() const override { return model_; }

  boost::asio::awaitable<ModelResult> Complete(const std::vector<Message>& conversation,
                                               const std::vector<ToolDeclaration>& tools) override {
    const std::string body = OpenAiRequestBody(model_, conversation, tools);
    co_return co_await CallModel(ex_, endpoint_, body, &ParseOpenAiAnswer);
  }

 private:
  boost::asio::any_io_executor ex_;
  std::string model_;
  ModelEndpoint endpoint_;
};

}  // namespace

std::string OpenAiRequestBody(std::string_view model, const std::vector<Message>& conversation,
                              const std::vector<ToolDeclaration>& tools) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "model", model);
    w.Key("messages");
    w.StartArray();
    for (const Message& m : conversation) WriteMessage(w, m);
    w.EndArray();
    if (!tools.empty()) {
      w.Key("tools");
      w.StartArray();
      for (const ToolDeclaration& t : tools) WriteTool(w, t);
      w.EndArray();
    }
    w.EndObject();
  });
}

ModelResult ParseOpenAiAnswer(std::string_view body) {
  rapidjson::Document d;
  std::string why;
  if (!ParseJson(body, d, why)) return Malformed("openai", "not JSON (" + why + ")");
  if (!d.IsObject()) return Malformed("openai", "not a JSON object");
  if (!d.HasMember("choices") || !d["choices"].IsArray() || d["choices"].Empty()) {
    return Malformed("openai", "no choices");
  }
  const Value& choice = d["choices"][0];
  if (!choice.IsObject() || !choice.HasMember("message") || !choice["message"].IsObject()) {
    return Malformed("openai", "choices[0] has no message");
  }
  const Value& message = choice["message"];

  Reply reply;
  reply.message.role = Message::Role::kAssistant;
  if (message.HasMember("content") && message["content"].IsString()) {
    reply.message.text = Text(message["content"]);
  } else if (message.HasMember("content") && !message["content"].IsNull()) {
    return Malformed("openai", "choices[0].message.content is neither a string nor null");
  }
  if (message.HasMember("tool_calls") && !message["tool_calls"].IsNull()) {
    if (!message["tool_calls"].IsArray()) {
      return Malformed("openai", "choices[0].message.tool_calls is not an array");
    }
    const auto calls = message["tool_calls"].GetArray();
    for (rapidjson::SizeType i = 0; i < calls.Size(); ++i) {
      auto call = ReadToolCall(calls[i], i);
      if (auto* error = std::get_if<ModelError>(&call)) return std::move(*error);
      reply.message.tool_calls.push_back(std::move(std::get<ToolCall>(call)));
    }
  }
  if (d.HasMember("usage")) {
    reply.usage.prompt_tokens = TokenCount(d["usage"], "prompt_tokens");
    reply.usage.completion_tokens = TokenCount(d["usage"], "completion_tokens");
  }
  return reply;
}

std::unique_ptr<Provider> MakeOpenAiProvider(boost::asio::any_io_executor ex,
                                             const LlmConfig& config) {
  return std::make_unique<OpenAiProvider>(std::move(ex), config);
}

}  // namespace ci::llm
