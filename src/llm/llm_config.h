// The model the daemon and `code-interpreter ask` talk to, from the environment (docs/agent.md
// "The agent loop"): LLM_PROVIDER, LLM_BASE_URL, LLM_MODEL, LLM_API_KEY or LLM_API_KEY_FILE,
// LLM_TIMEOUT_SEC. An invalid value is an error naming the variable.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "core/env_reader.h"
#include "core/status.h"

namespace ci::llm {

struct LlmConfig {
  std::string provider;  // "" (none configured) | "openai" | "gemini"
  // What the providers' SDKs take: "/chat/completions" is appended for openai
  // ("http://localhost:11434/v1"), "/models/{model}:generateContent" for gemini (default
  // "https://generativelanguage.googleapis.com/v1beta"). No trailing slash.
  std::string base_url;
  std::string model;
  std::string api_key;  // "" for a server that needs none (a local vLLM, Ollama)
  std::chrono::seconds timeout{60};

  bool configured() const { return !provider.empty(); }
};

// Reads a file's whole text (injectable for tests); an error names the path.
using ReadFile = std::function<Result<std::string>(const std::string& path)>;

// LLM_PROVIDER unset or empty: nothing configured (no other variable is read). Otherwise
// LLM_MODEL is required, LLM_BASE_URL is required for openai, the key comes from LLM_API_KEY or
// from the file LLM_API_KEY_FILE names (not both; trailing whitespace and newlines trimmed),
// LLM_TIMEOUT_SEC is 1..3600.
Result<LlmConfig> LoadLlmConfig(const EnvLookup& getenv, const ReadFile& read_file);

}  // namespace ci::llm
