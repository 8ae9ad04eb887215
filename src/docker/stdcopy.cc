#include "docker/stdcopy.h"

namespace ci::docker {

bool FrameDemuxer::Feed(std::string_view bytes) {
  while (!bytes.empty() && !failed_) {
    if (remaining_ > 0) {
      size_t n = std::min<size_t>(remaining_, bytes.size());
      sink_(current_, bytes.substr(0, n));
      remaining_ -= static_cast<uint32_t>(n);
      bytes.remove_prefix(n);
      continue;
    }
    size_t n = std::min(header_.size() - header_len_, bytes.size());
    std::copy_n(bytes.begin(), n, header_.begin() + header_len_);
    header_len_ += n;
    bytes.remove_prefix(n);
    if (header_len_ < header_.size()) break;
    header_len_ = 0;
    switch (header_[0]) {
      case 0:  // stdin: stdcopy treats it as stdout
      case 1:
        current_ = Stream::kStdout;
        break;
      case 2:
        current_ = Stream::kStderr;
        break;
      case 3:
        current_ = Stream::kSystemError;
        break;
      default:
        failed_ = true;
        return false;
    }
    remaining_ = (uint32_t{header_[4]} << 24) | (uint32_t{header_[5]} << 16) |
                 (uint32_t{header_[6]} << 8) | uint32_t{header_[7]};
  }
  return !failed_;
}

}  // namespace ci::docker
