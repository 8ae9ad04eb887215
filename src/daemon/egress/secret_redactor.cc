#include "daemon/egress/secret_redactor.h"

#include <algorithm>

namespace ci::daemon {

SecretRedactor::SecretRedactor(std::vector<std::string> values) {
  for (std::string& v : values) {
    if (v.empty()) continue;
    keep_ = std::max(keep_, v.size() - 1);
    values_.push_back(std::move(v));
  }
}

std::string SecretRedactor::Feed(std::string_view bytes) {
  held_.append(bytes);
  masked_.append(bytes.size(), '\0');
  // Searched in the original bytes: masking one value must not hide another overlapping it.
  for (const std::string& v : values_) {
    for (size_t at = held_.find(v); at != std::string::npos; at = held_.find(v, at + 1)) {
      std::fill_n(masked_.begin() + static_cast<std::ptrdiff_t>(at), v.size(), '*');
    }
  }
  // A value not found yet ends past the held bytes: it starts in the last keep_ of them.
  const size_t ready = held_.size() > keep_ ? held_.size() - keep_ : 0;
  std::string out = held_.substr(0, ready);
  for (size_t i = 0; i < ready; ++i) {
    if (masked_[i] == '*') out[i] = '*';
  }
  held_.erase(0, ready);
  masked_.erase(0, ready);
  return out;
}

std::string SecretRedactor::Finish() {
  std::string out = std::move(held_);
  for (size_t i = 0; i < out.size(); ++i) {
    if (masked_[i] == '*') out[i] = '*';
  }
  held_.clear();
  masked_.clear();
  return out;
}

}  // namespace ci::daemon
