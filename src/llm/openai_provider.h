// OpenAI's chat completions wire format (also vLLM's, llama.cpp's server's and Ollama's /v1):
// POST {base_url}/chat/completions with "Authorization: Bearer <key>" when there is a key. The
// translations are pure, so tests compare them against JSON.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "llm/conversation.h"
#include "llm/llm_config.h"
#include "llm/provider.h"

namespace ci::llm {

// {"model", "messages": [...], "tools": [...] (none: omitted)}.
std::string OpenAiRequestBody(std::string_view model, const std::vector<Message>& conversation,
                              const std::vector<ToolDeclaration>& tools);

// choices[0].message and usage as a Reply (wall unset), or a kMalformed ModelError naming what
// is missing.
ModelResult ParseOpenAiAnswer(std::string_view body);

std::unique_ptr<Provider> MakeOpenAiProvider(boost::asio::any_io_executor ex,
                                             const LlmConfig& config);

}  // namespace ci::llm
