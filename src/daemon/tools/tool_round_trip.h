// A model that calls our tools: the question goes to the model with the tools' declarations;
// each call it makes is run and its result sent back as the function response, until the model
// answers in words (`code-interpreter ask`).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "daemon/tools/tool_set.h"
#include "llm/conversation.h"
#include "llm/provider.h"

namespace ci::daemon {

struct RoundTripHooks {
  std::function<void(const llm::ToolCall&)> calling;                       // before a call runs
  std::function<void(const llm::ToolCall&, const ToolOutcome&)> returned;  // after
};

// The model's final answer, or why there is none (the model's error; a model still calling
// tools after `max_rounds` answers).
boost::asio::awaitable<std::variant<std::string, llm::ModelError>> AskWithTools(
    llm::Provider& model, ToolSet& tools, const std::vector<llm::ToolDeclaration>& offered,
    const std::string& question, const RoundTripHooks& hooks, int max_rounds = 8);

}  // namespace ci::daemon
