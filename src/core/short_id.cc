#include "core/short_id.h"

#include <cctype>

namespace ci {
namespace {

constexpr size_t kKept = 8;         // hex digits of an id's random part left in a log
constexpr size_t kRandomRun = 16;   // this many hex digits at an id's end are its random part
constexpr size_t kUuidLength = 36;  // 8-4-4-4-12
constexpr size_t kLongHexRun = 32;  // a run this long in a text is an id (code-session-<32>)

bool IsHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

bool IsUuidAt(std::string_view s, size_t at) {
  if (s.size() - at < kUuidLength) return false;
  for (size_t i = 0; i < kUuidLength; ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[at + i] != '-' : !IsHex(s[at + i])) return false;
  }
  return true;
}

size_t HexRunAt(std::string_view s, size_t at) {
  size_t n = 0;
  while (at + n < s.size() && IsHex(s[at + n])) ++n;
  return n;
}

}  // namespace

std::string ShortId(std::string_view id) {
  // A prefix such as "code-session-" stays: what is cut is the random part's end.
  size_t run = 0;
  while (run < id.size() && IsHex(id[id.size() - 1 - run])) ++run;
  const size_t start = run >= kRandomRun && run < id.size() ? id.size() - run : 0;
  return std::string(id.substr(0, start + kKept)) + "...";
}

std::string WithShortIds(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const bool after_hex = i > 0 && IsHex(text[i - 1]);
    if (!after_hex && IsUuidAt(text, i)) {
      out += ShortId(text.substr(i, kUuidLength));
      i += kUuidLength;
      continue;
    }
    const size_t run = after_hex ? 0 : HexRunAt(text, i);
    if (run >= kLongHexRun) {
      out += ShortId(text.substr(i, run));
      i += run;
      continue;
    }
    out += text[i++];
  }
  return out;
}

}  // namespace ci
