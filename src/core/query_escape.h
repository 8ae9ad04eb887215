// Percent-encoding of a URL query value or path segment (the Docker and Kubernetes APIs).
#pragma once

#include <string>
#include <string_view>

namespace ci {

// RFC 3986 unreserved characters stay; every other byte is %XX.
inline std::string QueryEscape(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace ci
