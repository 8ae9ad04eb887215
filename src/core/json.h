// Small RapidJSON helpers for every layer. Everything inline here is exception-free (RapidJSON
// reports errors by value), so the shim uses it too; ci::json:: is the keyed-field style of the
// runtime's control messages.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ci {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

inline void WriteString(JsonWriter& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// `"key": "value"` inside an object.
inline void WriteField(JsonWriter& w, std::string_view key, std::string_view value) {
  w.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
  WriteString(w, value);
}

// Appends `s` to `out` as a JSON string literal (quotes included).
std::string JsonQuote(std::string_view s);

// Parses UTF-8 JSON, validating the encoding. On failure returns false and sets `why`.
bool ParseJson(std::string_view text, rapidjson::Document& doc, std::string& why);

}  // namespace ci

namespace ci::json {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

inline void Key(Writer& w, const char* k) { w.Key(k); }
inline void Str(Writer& w, const char* k, std::string_view v) {
  w.Key(k);
  w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
}
inline void U64(Writer& w, const char* k, uint64_t v) {
  w.Key(k);
  w.Uint64(v);
}
inline void I64(Writer& w, const char* k, int64_t v) {
  w.Key(k);
  w.Int64(v);
}
inline void Bool(Writer& w, const char* k, bool v) {
  w.Key(k);
  w.Bool(v);
}
inline void Strs(Writer& w, const char* k, const std::vector<std::string>& v) {
  w.Key(k);
  w.StartArray();
  for (const auto& s : v) w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  w.EndArray();
}

// Parses an object; false on malformed input or a non-object.
inline bool Parse(std::string_view text, rapidjson::Document* doc) {
  doc->Parse(text.data(), text.size());
  return !doc->HasParseError() && doc->IsObject();
}

// Getters leave *out unchanged when the key is missing or of another type; they return whether
// the key was present with the right type.
inline bool Get(const rapidjson::Value& o, const char* k, std::string* out) {
  auto it = o.FindMember(k);
  if (it == o.MemberEnd() || !it->value.IsString()) return false;
  out->assign(it->value.GetString(), it->value.GetStringLength());
  return true;
}
inline bool Get(const rapidjson::Value& o, const char* k, uint64_t* out) {
  auto it = o.FindMember(k);
  if (it == o.MemberEnd() || !it->value.IsUint64()) return false;
  *out = it->value.GetUint64();
  return true;
}
inline bool Get(const rapidjson::Value& o, const char* k, int64_t* out) {
  auto it = o.FindMember(k);
  if (it == o.MemberEnd() || !it->value.IsInt64()) return false;
  *out = it->value.GetInt64();
  return true;
}
inline bool Get(const rapidjson::Value& o, const char* k, uint32_t* out) {
  uint64_t v = 0;
  if (!Get(o, k, &v) || v > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}
inline bool Get(const rapidjson::Value& o, const char* k, int* out) {
  auto it = o.FindMember(k);
  if (it == o.MemberEnd() || !it->value.IsInt()) return false;
  *out = it->value.GetInt();
  return true;
}
inline bool Get(const rapidjson::Value& o, const char* k, bool* out) {
  auto it = o.FindMember(k);
  if (it == o.MemberEnd() || !it->value.IsBool()) return false;
  *out = it->value.GetBool();
  return true;
}
inline bool Get(const rapidjson::Value& o, const char* k, std::vector<std::string>* out) {
  auto it = o.FindMember(k);
  if (it == o.MemberEnd() || !it->value.IsArray()) return false;
  out->clear();
  for (const auto& v : it->value.GetArray()) {
    if (!v.IsString()) return false;
    out->emplace_back(v.GetString(), v.GetStringLength());
  }
  return true;
}

}  // namespace ci::json
