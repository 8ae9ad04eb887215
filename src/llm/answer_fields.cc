#include "llm/answer_fields.h"

namespace ci::llm {

ModelError Malformed(std::string_view provider, const std::string& what) {
  return ModelError{ModelError::Kind::kMalformed, std::string(provider) + " answer: " + what};
}

std::string Text(const rapidjson::Value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

int64_t TokenCount(const rapidjson::Value& usage, const char* name) {
  if (!usage.IsObject() || !usage.HasMember(name) || !usage[name].IsInt64()) return 0;
  return usage[name].GetInt64();
}

}  // namespace ci::llm
