#include "daemon/egress/chunked_decoder.h"

#include <algorithm>

namespace ci::daemon {

bool ChunkedDecoder::Feed(std::string_view bytes, std::string* body) {
  constexpr size_t kMaxLine = 4096;
  while (!bytes.empty() && state_ != State::kDone) {
    if (state_ == State::kData) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left_, bytes.size()));
      body->append(bytes.substr(0, n));
      bytes.remove_prefix(n);
      left_ -= n;
      if (left_ == 0) state_ = State::kDataEnd;
      continue;
    }
    const size_t eol = bytes.find('\n');
    line_.append(bytes.substr(0, eol));
    if (line_.size() > kMaxLine) return false;
    if (eol == std::string_view::npos) return true;
    bytes.remove_prefix(eol + 1);
    std::string_view line = line_;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (state_ == State::kDataEnd) {
      if (!line.empty()) return false;
      state_ = State::kSize;
    } else if (state_ == State::kTrailer) {
      if (line.empty()) state_ = State::kDone;
    } else {  // kSize: hex digits, then extensions after ';'
      uint64_t size = 0;
      size_t digits = 0;
      for (; digits < line.size() && std::isxdigit(static_cast<unsigned char>(line[digits]));
           ++digits) {
        if (digits >= 15) return false;
        const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(line[digits])));
        size = size * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
      }
      if (digits == 0) return false;
      left_ = size;
      state_ = size == 0 ? State::kTrailer : State::kData;
    }
    line_.clear();
  }
  return true;
}

}  // namespace ci::daemon
