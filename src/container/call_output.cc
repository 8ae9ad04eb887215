#include "container/call_output.h"

#include <algorithm>
#include <cctype>

namespace ci::container {

std::string CallFrame(std::string_view request, std::string_view input, std::string_view nonce) {
  auto u32 = [](size_t n) {
    std::string b(4, '\0');
    for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return b;
  };
  std::string frame = u32(request.size());
  frame.append(request);
  frame += u32(input.size());
  frame.append(input);
  frame.append(nonce);
  return frame;
}

void CallOutput::Begin(const std::string& nonce) {
  marker_ = "\x1e" + nonce;
  held_.clear();
  active_ = true;
  ended_ = false;
  status_ = 1;
  flags_ = 0;
}

std::string CallOutput::Feed(std::string_view bytes) {
  if (!active_) return {};
  std::string data = std::move(held_);
  held_.clear();
  data.append(bytes);
  size_t at = data.find(marker_);
  if (at != std::string::npos) {
    const size_t tail = at + marker_.size();
    if (data.size() < tail + 5) {  // the status has not arrived yet
      held_ = data.substr(at);
      return data.substr(0, at);
    }
    auto digit = [&](size_t i) {
      char c = data[tail + i];
      return std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : -1;
    };
    int a = digit(0), b = digit(1), c = digit(2), f = digit(3);
    if (a >= 0 && b >= 0 && c >= 0 && f >= 0) {
      status_ = std::min(255, a * 100 + b * 10 + c);
      flags_ = f;
    }
    active_ = false;
    ended_ = true;
    return data.substr(0, at);
  }
  // Hold back the longest tail that could begin the marker.
  for (size_t k = std::min(marker_.size() - 1, data.size()); k > 0; --k) {
    if (data.compare(data.size() - k, k, marker_, 0, k) == 0) {
      held_ = data.substr(data.size() - k);
      data.resize(data.size() - k);
      break;
    }
  }
  return data;
}

}  // namespace ci::container
