// A TLS ClientHello as a client sends it, for the egress tests: the server names given (each in
// a server_name extension of its own when `separate`), split over `records` handshake records.
#pragma once

#include <string>
#include <vector>

namespace ci::daemon {

inline std::string U16(size_t v) { return {static_cast<char>(v >> 8), static_cast<char>(v)}; }

inline std::string ClientHelloBytes(const std::vector<std::string>& names, int records = 1,
                                    bool separate = false) {
  auto server_name = [](const std::vector<std::string>& list) {
    std::string entries;
    for (const auto& n : list) entries += '\0' + U16(n.size()) + n;
    std::string body = U16(entries.size()) + entries;
    return U16(0) + U16(body.size()) + body;
  };
  std::string extensions;
  if (separate) {
    for (const auto& n : names) extensions += server_name({n});
  } else if (!names.empty()) {
    extensions = server_name(names);
  }
  extensions += U16(43) + U16(3) + std::string("\x02\x03\x04", 3);  // supported_versions
  std::string hello = std::string("\x03\x03", 2) + std::string(32, 'r') + std::string(1, '\0') +
                      U16(2) + std::string("\x13\x01", 2) + std::string("\x01\x00", 2) +
                      U16(extensions.size()) + extensions;
  const size_t n = hello.size();
  std::string handshake = std::string(1, '\x01') +
                          std::string{'\0', static_cast<char>(n >> 8), static_cast<char>(n)} +
                          hello;
  std::string out;
  const size_t step = (handshake.size() + records - 1) / records;
  for (size_t at = 0; at < handshake.size(); at += step) {
    std::string part = handshake.substr(at, step);
    out += std::string("\x16\x03\x01", 3) + U16(part.size()) + part;
  }
  return out;
}

}  // namespace ci::daemon
