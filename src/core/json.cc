#include "core/json.h"

#include <rapidjson/error/en.h>

namespace ci {

std::string JsonQuote(std::string_view s) {
  return JsonText([&](JsonWriter& w) { WriteString(w, s); });
}

bool ParseJson(std::string_view text, rapidjson::Document& doc, std::string& why) {
  // Iterative: a deeply nested body must not overflow the daemon's stack.
  doc.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag>(text.data(),
                                                                                    text.size());
  if (doc.HasParseError()) {
    why = std::string(rapidjson::GetParseError_En(doc.GetParseError())) + " at offset " +
          std::to_string(doc.GetErrorOffset());
    return false;
  }
  return true;
}

}  // namespace ci
