#include "llm/provider.h"

#include "llm/gemini_provider.h"
#include "llm/openai_provider.h"

namespace ci::llm {

std::unique_ptr<Provider> MakeProvider(boost::asio::any_io_executor ex, const LlmConfig& config) {
  if (config.provider == "openai") return MakeOpenAiProvider(std::move(ex), config);
  if (config.provider == "gemini") return MakeGeminiProvider(std::move(ex), config);
  return nullptr;  // not configured: LoadLlmConfig admits no other name
}

}  // namespace ci::llm
