#include "core/json.h"

#include <rapidjson/error/en.h>

namespace ci {

std::string JsonQuote(std::string_view s) {
  return JsonText([&](JsonWriter& w) { WriteString(w, s); });
}

bool JsonNestsTooDeep(std::string_view text) {
  size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

bool ParseJson(std::string_view text, rapidjson::Document& doc, std::string& why) {
  if (JsonNestsTooDeep(text)) {
    why = "arrays and objects nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
    return false;
  }
  // Iterative as well: the depth bound is what keeps later walks (Accept, copies) off the stack.
  doc.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag>(text.data(),
                                                                                    text.size());
  if (doc.HasParseError()) {
    why = std::string(rapidjson::GetParseError_En(doc.GetParseError())) + " at offset " +
          std::to_string(doc.GetErrorOffset());
    return false;
  }
  return true;
}

Result<rapidjson::Document> ParseJsonObject(std::string_view text, std::string_view what) {
  rapidjson::Document doc;
  std::string why;
  if (text.empty()) text = "{}";
  if (!ParseJson(text, doc, why)) return Status::Error(std::string(what) + " is not JSON: " + why);
  if (!doc.IsObject()) return Status::Error(std::string(what) + " must be a JSON object");
  return doc;
}

}  // namespace ci
