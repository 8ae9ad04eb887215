#include "daemon/tools/tool_round_trip.h"

#include "core/json.h"

namespace ci::daemon {
namespace {

constexpr const char* kInstructions =
    "Answer the user's question. For anything that needs computing (arithmetic, primes, "
    "counting, dates, data), call the solve_task tool with a complete, self-contained "
    "description of what to compute instead of working it out yourself, then answer from its "
    "output.";

// Calls run per answer of the model; the rest are answered without running (one answer of
// hundreds of calls ran hundreds of sandboxes from one question).
constexpr size_t kMaxCallsPerAnswer = 4;

// A function response is an object for both providers: the result, or {"error": why}.
std::string ResponseObject(const ToolOutcome& outcome) {
  if (!outcome.is_error) return outcome.result_json;
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "error", outcome.text);
    w.EndObject();
  });
}

}  // namespace

boost::asio::awaitable<std::variant<std::string, llm::ModelError>> AskWithTools(
    llm::Provider& model, ToolSet& tools, const std::vector<llm::ToolDeclaration>& offered,
    const std::string& question, const RoundTripHooks& hooks, int max_rounds) {
  std::vector<llm::Message> conversation;
  conversation.push_back({llm::Message::Role::kSystem, kInstructions, {}, {}, {}});
  conversation.push_back({llm::Message::Role::kUser, question, {}, {}, {}});
  for (int round = 0; round < max_rounds; ++round) {
    llm::ModelResult answer = co_await model.Complete(conversation, offered);
    if (auto* e = std::get_if<llm::ModelError>(&answer)) co_return *e;
    llm::Message reply = std::move(std::get<llm::Reply>(answer).message);
    if (reply.tool_calls.empty()) co_return reply.text;
    std::vector<llm::ToolCall> calls = reply.tool_calls;
    conversation.push_back(std::move(reply));
    for (size_t i = 0; i < calls.size(); ++i) {
      const llm::ToolCall& call = calls[i];
      ToolOutcome outcome{.is_error = true,
                          .text = "not run: at most " + std::to_string(kMaxCallsPerAnswer) +
                                  " tool calls of one answer are run; call again for the rest",
                          .result_json = "{}",
                          .images = {}};
      if (i < kMaxCallsPerAnswer) {
        if (hooks.calling) hooks.calling(call);
        outcome = co_await tools.Call(call.name, call.arguments_json, "");
        if (hooks.returned) hooks.returned(call, outcome);
      }
      conversation.push_back(
          {llm::Message::Role::kTool, ResponseObject(outcome), {}, call.id, call.name});
    }
  }
  co_return llm::ModelError{
      llm::ModelError::Kind::kMalformed,
      "the model was still calling tools after " + std::to_string(max_rounds) + " rounds", 0};
}

}  // namespace ci::daemon
