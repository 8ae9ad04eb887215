#include "llm/gemini_schema.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/json.h"

namespace ci::llm {
namespace {

using rapidjson::Value;
using Allocator = rapidjson::Document::AllocatorType;

// The fields of Gemini's Schema object (v1beta); anything else is refused with a 400.
constexpr std::array<std::string_view, 22> kGeminiFields = {
    "type",      "format",    "title",      "description", "nullable",      "enum",
    "maxItems",  "minItems",  "properties", "required",    "minProperties", "maxProperties",
    "minLength", "maxLength", "pattern",    "example",     "anyOf",         "propertyOrdering",
    "default",   "items",     "minimum",    "maximum"};

bool Known(std::string_view key) {
  return std::find(kGeminiFields.begin(), kGeminiFields.end(), key) != kGeminiFields.end();
}

Value Upper(const Value& name, Allocator& a) {
  std::string s(name.GetString(), name.GetStringLength());
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return Value(s.c_str(), static_cast<rapidjson::SizeType>(s.size()), a);
}

Value Convert(const Value& in, Allocator& a) {
  if (!in.IsObject()) return Value(in, a);
  Value out(rapidjson::kObjectType);
  bool nullable = false;
  for (const auto& m : in.GetObject()) {
    const std::string_view key(m.name.GetString(), m.name.GetStringLength());
    if (!Known(key)) continue;
    Value name(m.name, a);
    if (key == "type" && m.value.IsString()) {
      out.AddMember(name, Upper(m.value, a), a);
    } else if (key == "type" && m.value.IsArray()) {
      // ["string", "null"]: Gemini has one type and a nullable flag.
      Value type;
      for (const Value& t : m.value.GetArray()) {
        if (!t.IsString()) continue;
        if (std::string_view(t.GetString()) == "null") {
          nullable = true;
        } else if (type.IsNull()) {
          type = Upper(t, a);
        }
      }
      if (!type.IsNull()) out.AddMember(name, type, a);
    } else if (key == "properties" && m.value.IsObject()) {
      Value properties(rapidjson::kObjectType);
      for (const auto& p : m.value.GetObject()) {
        properties.AddMember(Value(p.name, a), Convert(p.value, a), a);
      }
      out.AddMember(name, properties, a);
    } else if (key == "items") {
      out.AddMember(name, Convert(m.value, a), a);
    } else if (key == "anyOf" && m.value.IsArray()) {
      Value any(rapidjson::kArrayType);
      for (const Value& s : m.value.GetArray()) any.PushBack(Convert(s, a), a);
      out.AddMember(name, any, a);
    } else {
      out.AddMember(name, Value(m.value, a), a);
    }
  }
  if (nullable && !out.HasMember("nullable")) out.AddMember("nullable", true, a);
  return out;
}

}  // namespace

std::string GeminiSchema(std::string_view openai_json_schema) {
  rapidjson::Document in;
  std::string why;
  if (!ParseJson(openai_json_schema, in, why) || !in.IsObject()) return R"({"type":"OBJECT"})";
  rapidjson::Document out;
  Value converted = Convert(in, out.GetAllocator());
  return JsonText([&](JsonWriter& w) { converted.Accept(w); });
}

}  // namespace ci::llm
