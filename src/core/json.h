// Small RapidJSON helpers shared by the daemon and the runtime.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <string>
#include <string_view>

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
