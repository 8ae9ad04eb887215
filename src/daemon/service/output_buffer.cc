#include "daemon/service/output_buffer.h"

#include <algorithm>

namespace ci::daemon {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
constexpr std::string_view kTruncationMarker = "\n...[truncated]";
constexpr size_t kMarkerReserve = 32;

// Length of the valid UTF-8 sequence starting at s[i], 0 if invalid, or -1 if `s` ends inside a
// sequence that is valid so far.
int SequenceLength(std::string_view s, size_t i) {
  auto b = static_cast<unsigned char>(s[i]);
  int len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3;
    if (b == 0xE0) lo = 0xA0;  // overlong
    if (b == 0xED) hi = 0x9F;  // surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4;
    if (b == 0xF0) lo = 0x90;  // overlong
    if (b == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  for (int k = 1; k < len; ++k) {
    if (i + k >= s.size()) return -1;
    auto c = static_cast<unsigned char>(s[i + k]);
    if (k == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) return 0;
  }
  return len;
}

// Decodes the longest prefix of `s` that does not end inside a possibly valid sequence; returns
// how many bytes were consumed.
size_t DecodeInto(std::string_view s, std::string& out, bool final) {
  size_t i = 0;
  while (i < s.size()) {
    int len = SequenceLength(s, i);
    if (len == -1 && !final) break;
    if (len <= 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  return i;
}

}  // namespace

std::string SanitizeUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  DecodeInto(bytes, out, /*final=*/true);
  return out;
}

void CappedOutput::Append(std::string_view chunk) {
  total_ += chunk.size();
  if (kept_.size() < cap_) kept_.append(chunk.substr(0, cap_ - kept_.size()));
}

std::string CappedOutput::Text() const {
  if (!truncated()) return SanitizeUtf8(kept_);
  size_t keep = cap_ > kMarkerReserve ? cap_ - kMarkerReserve : 0;
  std::string out = SanitizeUtf8(std::string_view(kept_).substr(0, keep));
  out += kTruncationMarker;
  return out;
}

std::string Utf8Stream::Push(std::string_view chunk) {
  if (chunk.size() > remaining_) {
    truncated_ = true;
    chunk = chunk.substr(0, remaining_);
  }
  remaining_ -= chunk.size();
  std::string bytes = pending_;
  bytes.append(chunk);
  std::string out;
  size_t used = DecodeInto(bytes, out, /*final=*/false);
  pending_ = bytes.substr(used);
  return out;
}

std::string Utf8Stream::Flush() {
  std::string out;
  DecodeInto(pending_, out, /*final=*/true);
  pending_.clear();
  return out;
}

}  // namespace ci::daemon
