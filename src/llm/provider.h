// A chat model behind its provider's HTTP API: OpenAI-compatible chat completions (OpenAI, vLLM,
// llama.cpp's server, Ollama) or Gemini's generateContent. Configured from the environment only
// (llm_config.h), never from a request.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "llm/conversation.h"
#include "llm/llm_config.h"

namespace ci::llm {

class Provider {
 public:
  virtual ~Provider() = default;
  virtual std::string_view name() const = 0;  // "openai" | "gemini"
  virtual const std::string& model() const = 0;
  // One request: the whole conversation so far and the functions the model may call (none: a
  // plain completion). Bounded by the config's timeout. Views only: the caller's objects
  // outlive the call (GCC 12 and temporaries in co_await expressions).
  virtual boost::asio::awaitable<ModelResult> Complete(
      const std::vector<Message>& conversation, const std::vector<ToolDeclaration>& tools) = 0;
};

// The provider `config` names (config.configured() must be true).
std::unique_ptr<Provider> MakeProvider(boost::asio::any_io_executor ex, const LlmConfig& config);

}  // namespace ci::llm
