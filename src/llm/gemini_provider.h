// Gemini's generateContent wire format: POST {base_url}/models/{model}:generateContent with
// "x-goog-api-key: <key>". The translations are pure, so tests compare them against JSON.
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

// {"contents": [...], "systemInstruction" (when there is a system message), "tools" (none:
// omitted)}: assistant turns are role "model", tool results role "user" with functionResponse
// parts (consecutive results in one content), parameters in Gemini's schema (gemini_schema.h).
std::string GeminiRequestBody(const std::vector<Message>& conversation,
                              const std::vector<ToolDeclaration>& tools);

// candidates[0].content.parts and usageMetadata as a Reply (wall unset; each function call gets
// an id "call_<n>" unless Gemini sent one), or a kMalformed ModelError: a blocked prompt or an
// empty candidate names Gemini's reason.
ModelResult ParseGeminiAnswer(std::string_view body);

std::unique_ptr<Provider> MakeGeminiProvider(boost::asio::any_io_executor ex,
                                             const LlmConfig& config);

}  // namespace ci::llm
