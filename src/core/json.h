// Small RapidJSON helpers for every layer. Everything inline here is exception-free (RapidJSON
// reports errors by value), so the shim uses it too. ci::json:: holds the field tables of the
// runtime's control messages: one list of fields per message serves encoding and decoding.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/random.h"
#include "core/status.h"

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

// The text `write(w)` produces: one helper instead of a StringBuffer and a Writer per caller.
template <typename Write>
std::string JsonText(Write&& write) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  write(w);
  return std::string(buf.GetString(), buf.GetSize());
}

// Appends `s` to `out` as a JSON string literal (quotes included).
std::string JsonQuote(std::string_view s);

// How deep arrays and objects may nest in JSON the daemon reads. Every walk over a parsed value
// (Accept, CopyFrom, our own) recurses once per level: the bound keeps any of them off the end of
// the stack, whoever sent the text (a client, a model, a sandbox's agent).
constexpr size_t kMaxJsonDepth = 128;
// True when `text` nests arrays and objects deeper than kMaxJsonDepth. One pass without recursion,
// exact for valid JSON (text that is not JSON is refused by the parser anyway).
bool JsonNestsTooDeep(std::string_view text);

// Parses UTF-8 JSON, validating the encoding and refusing nesting deeper than kMaxJsonDepth. On
// failure returns false and sets `why`.
bool ParseJson(std::string_view text, rapidjson::Document& doc, std::string& why);
// ParseJson of what must be an object ("" reads as {}); errors begin with `what` ("the body").
Result<rapidjson::Document> ParseJsonObject(std::string_view text, std::string_view what);

}  // namespace ci

namespace ci::json {

// A message type lists its fields once, as a function template found by ADL:
//
//   template <typename V, json::Message<SetupError> M>
//   void Fields(V& v, M& m) { v("stage", m.stage); v("errno", m.err); }
//
// M is the message, const when encoding. Encode() and Decode() below walk that one list; every
// field is required when decoding unless it is listed with v.Optional(key, member).
template <typename M, typename T>
concept Message = std::same_as<std::remove_const_t<M>, T>;

// Bytes carried as lowercase hex (a JSON string must be UTF-8).
struct HexBytes {
  std::string& bytes;
};
struct ConstHexBytes {
  const std::string& bytes;
};
inline HexBytes Hex(std::string& bytes) { return {bytes}; }
inline ConstHexBytes Hex(const std::string& bytes) { return {bytes}; }

class FieldWriter {
 public:
  explicit FieldWriter(JsonWriter& w) : w_(w) {}
  void operator()(const char* k, std::string_view v) { WriteField(w_, k, v); }
  // Not bool: a string literal would convert to bool before string_view.
  void operator()(const char* k, const char* v) { WriteField(w_, k, v); }
  void operator()(const char* k, bool v) { Key(k).Bool(v); }
  void operator()(const char* k, int v) { Key(k).Int64(v); }
  void operator()(const char* k, int64_t v) { Key(k).Int64(v); }
  void operator()(const char* k, uint32_t v) { Key(k).Uint64(v); }
  void operator()(const char* k, uint64_t v) { Key(k).Uint64(v); }
  void operator()(const char* k, double v) { Key(k).Double(v); }
  void operator()(const char* k, const std::vector<std::string>& v) {
    Key(k).StartArray();
    for (const auto& s : v) WriteString(w_, s);
    w_.EndArray();
  }
  void operator()(const char* k, ConstHexBytes v) { WriteField(w_, k, HexEncode(v.bytes)); }
  template <typename T>
  void Optional(const char* k, const T& v) {
    (*this)(k, v);
  }

 private:
  JsonWriter& Key(const char* k) {
    w_.Key(k);
    return w_;
  }
  JsonWriter& w_;
};

// Reads each field into its member; ok() is false once one is missing or of another type (the
// members read before it are set, the rest keep their values).
class FieldReader {
 public:
  explicit FieldReader(const rapidjson::Value& o) : o_(o) {}
  bool ok() const { return ok_; }
  template <typename T>
  void operator()(const char* k, T& v) {
    if (ok_) ok_ = Read(k, v, /*required=*/true);
  }
  void operator()(const char* k, HexBytes v) {
    std::string hex;
    if (ok_) ok_ = Read(k, hex, true) && HexDecode(hex, &v.bytes);
  }
  template <typename T>
  void Optional(const char* k, T& v) {
    if (ok_) ok_ = Read(k, v, /*required=*/false);
  }

 private:
  // False when the key is of another type, or missing and required.
  template <typename T>
  bool Read(const char* k, T& v, bool required) {
    // HasMember/operator[]: comparing member iterators is ambiguous in C++20 for clang.
    if (!o_.HasMember(k)) return !required;
    return Convert(o_[k], v);
  }
  static bool Convert(const rapidjson::Value& j, std::string& v) {
    if (!j.IsString()) return false;
    v.assign(j.GetString(), j.GetStringLength());
    return true;
  }
  static bool Convert(const rapidjson::Value& j, bool& v) {
    if (!j.IsBool()) return false;
    v = j.GetBool();
    return true;
  }
  static bool Convert(const rapidjson::Value& j, int& v) {
    if (!j.IsInt()) return false;
    v = j.GetInt();
    return true;
  }
  static bool Convert(const rapidjson::Value& j, int64_t& v) {
    if (!j.IsInt64()) return false;
    v = j.GetInt64();
    return true;
  }
  static bool Convert(const rapidjson::Value& j, uint32_t& v) {
    if (!j.IsUint()) return false;
    v = j.GetUint();
    return true;
  }
  static bool Convert(const rapidjson::Value& j, uint64_t& v) {
    if (!j.IsUint64()) return false;
    v = j.GetUint64();
    return true;
  }
  static bool Convert(const rapidjson::Value& j, double& v) {
    if (!j.IsNumber()) return false;
    v = j.GetDouble();
    return true;
  }
  static bool Convert(const rapidjson::Value& j, std::vector<std::string>& v) {
    if (!j.IsArray()) return false;
    v.clear();
    for (const auto& s : j.GetArray()) {
      if (!s.IsString()) return false;
      v.emplace_back(s.GetString(), s.GetStringLength());
    }
    return true;
  }

  const rapidjson::Value& o_;
  bool ok_ = true;
};

// The message as one JSON object, through its Fields().
template <typename M>
std::string Encode(const M& m) {
  return JsonText([&](JsonWriter& w) {
    FieldWriter v(w);
    w.StartObject();
    Fields(v, m);
    w.EndObject();
  });
}

// False on malformed JSON, a non-object, or a field that is missing or of another type.
template <typename M>
bool Decode(std::string_view text, M* m) {
  if (JsonNestsTooDeep(text)) return false;
  rapidjson::Document d;
  // Full precision: a double reads back exactly as it was written.
  d.Parse<rapidjson::kParseFullPrecisionFlag | rapidjson::kParseIterativeFlag>(text.data(),
                                                                               text.size());
  if (d.HasParseError() || !d.IsObject()) return false;
  FieldReader v(d);
  Fields(v, *m);
  return v.ok();
}

}  // namespace ci::json
