#include "llm/llm_config.h"

#include <string_view>

#include "llm/http_client.h"

namespace ci::llm {
namespace {

constexpr std::string_view kGeminiBaseUrl = "https://generativelanguage.googleapis.com/v1beta";
constexpr std::string_view kTrailingSpace = " \t\r\n\f\v";

// A key goes into a request header: a control character there would end the header early.
bool HasControlCharacter(std::string_view s) {
  for (unsigned char c : s) {
    if (c < ' ' || c == 0x7f) return true;
  }
  return false;
}

// The base URL without trailing slashes, checked as a whole URL.
Result<std::string> BaseUrl(const std::string& raw) {
  if (raw.rfind("http://", 0) != 0 && raw.rfind("https://", 0) != 0) {
    return Status::Error("LLM_BASE_URL: '" + raw + "' must start with http:// or https://");
  }
  std::string url = raw;
  const size_t authority = url.find("://") + 3;
  while (url.size() > authority && url.back() == '/') url.pop_back();
  Result<Url> parsed = ParseUrl(url);
  if (!parsed.ok()) return Status::Error("LLM_BASE_URL: " + parsed.status().message());
  return url;
}

// The key from LLM_API_KEY or the file LLM_API_KEY_FILE names; "" for none. No message holds
// the key itself.
Result<std::string> ApiKey(const EnvLookup& getenv, const ReadFile& read_file) {
  const char* inline_key = getenv("LLM_API_KEY");
  const char* key_file = getenv("LLM_API_KEY_FILE");
  const bool has_inline = inline_key != nullptr && *inline_key != '\0';
  const bool has_file = key_file != nullptr && *key_file != '\0';
  if (has_inline && has_file) {
    return Status::Error("LLM_API_KEY and LLM_API_KEY_FILE are both set: use one");
  }
  std::string key;
  std::string origin = "LLM_API_KEY";
  if (has_file) {
    origin = std::string("LLM_API_KEY_FILE (") + key_file + ")";
    Result<std::string> text = read_file(key_file);
    if (!text.ok()) return Status::Error("LLM_API_KEY_FILE: " + text.status().message());
    key = std::move(text).value();
    key.erase(key.find_last_not_of(kTrailingSpace) + 1);
    if (key.empty()) return Status::Error(origin + ": the file is empty");
  } else if (has_inline) {
    key = inline_key;
  }
  if (HasControlCharacter(key)) {
    return Status::Error(origin + ": the key holds a control character (a line break?)");
  }
  return key;
}

}  // namespace

Result<LlmConfig> LoadLlmConfig(const EnvLookup& getenv, const ReadFile& read_file) {
  LlmConfig c;
  const char* provider = getenv("LLM_PROVIDER");
  if (provider == nullptr || *provider == '\0') return c;

  EnvReader env(getenv);
  env.Choice("LLM_PROVIDER", c.provider, {"openai", "gemini"});
  env.String("LLM_MODEL", c.model);
  std::string base_url;
  env.String("LLM_BASE_URL", base_url);
  int64_t timeout_sec = c.timeout.count();
  env.Int("LLM_TIMEOUT_SEC", timeout_sec, 1, 3600);
  if (!env.error().ok()) return env.error();
  c.timeout = std::chrono::seconds(timeout_sec);

  if (c.model.empty()) return Status::Error("LLM_MODEL must be set when LLM_PROVIDER is set");
  if (base_url.empty() && c.provider == "openai") {
    return Status::Error(
        "LLM_BASE_URL must be set when LLM_PROVIDER is openai: the API's base, e.g. "
        "https://api.openai.com/v1, or http://localhost:11434/v1 for Ollama");
  }
  if (base_url.empty()) base_url = kGeminiBaseUrl;
  Result<std::string> url = BaseUrl(base_url);
  if (!url.ok()) return url.status();
  c.base_url = std::move(url).value();

  Result<std::string> key = ApiKey(getenv, read_file);
  if (!key.ok()) return key.status();
  c.api_key = std::move(key).value();
  return c;
}

}  // namespace ci::llm
