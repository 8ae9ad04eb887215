// Random ids from the kernel's CSPRNG, and hex encoding and decoding. Header-only and
// exception-free: the shim uses it too.
#pragma once

#include <sys/random.h>

#include <cerrno>
#include <cstddef>
#include <string>
#include <string_view>

namespace ci {

// Lowercase hex, two digits a byte.
inline std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

// The bytes of lowercase hex; false on an odd length or a non-hex digit.
inline bool HexDecode(std::string_view hex, std::string* out) {
  auto nibble = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  if (hex.size() % 2 != 0) return false;
  out->clear();
  out->reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi << 4 | lo));
  }
  return true;
}

// getrandom(2) until `n` bytes are there; false only when the kernel refuses (errno says why).
inline bool RandomBytes(void* out, size_t n) {
  auto* p = static_cast<unsigned char*>(out);
  for (size_t got = 0; got < n;) {
    ssize_t r = ::getrandom(p + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

// `n` random bytes as 2n hex digits; empty when the kernel refuses.
inline std::string RandomHex(size_t n) {
  std::string bytes(n, '\0');
  return RandomBytes(bytes.data(), n) ? HexEncode(bytes) : std::string();
}

}  // namespace ci
