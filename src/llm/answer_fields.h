#pragma once
// Reading a model's JSON answer: what the OpenAI and Gemini wire formats share.

#include <rapidjson/document.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "llm/conversation.h"

namespace ci::llm {

// A kMalformed error naming the provider whose answer it was ("openai answer: ...").
ModelError Malformed(std::string_view provider, const std::string& what);

// A string value's bytes (embedded NULs kept). `v` must be a string.
std::string Text(const rapidjson::Value& v);

// usage[name] when it is an integer, else 0: token counts are reported, never required.
int64_t TokenCount(const rapidjson::Value& usage, const char* name);

}  // namespace ci::llm
