#include "daemon/egress/tls_client_hello.h"

#include <cstdint>

namespace ci::daemon {
namespace {

constexpr uint8_t kHandshake = 0x16;
constexpr uint8_t kClientHelloType = 0x01;
constexpr uint16_t kServerNameExtension = 0;

// Reads big-endian fields off the front of a view; any read past its end fails the reader.
struct Reader {
  std::string_view data;
  bool ok = true;

  uint32_t Number(size_t bytes) {
    if (data.size() < bytes) {
      ok = false;
      return 0;
    }
    uint32_t v = 0;
    for (size_t i = 0; i < bytes; ++i) v = (v << 8) | static_cast<uint8_t>(data[i]);
    data.remove_prefix(bytes);
    return v;
  }
  std::string_view Bytes(size_t n) {
    if (data.size() < n) {
      ok = false;
      return {};
    }
    std::string_view out = data.substr(0, n);
    data.remove_prefix(n);
    return out;
  }
  std::string_view Vector(size_t length_bytes) { return Bytes(Number(length_bytes)); }
};

// The host_name of a server_name extension's body.
std::optional<std::string> HostName(std::string_view body) {
  Reader list{body};
  Reader names{list.Vector(2)};
  while (list.ok && names.ok && !names.data.empty()) {
    const uint32_t type = names.Number(1);
    std::string_view name = names.Vector(2);
    if (names.ok && type == 0) return std::string(name);
  }
  return std::nullopt;
}

}  // namespace

ClientHello ParseClientHello(std::string_view bytes) {
  if (bytes.size() > kMaxClientHello) return {ClientHello::State::kNotTls, std::nullopt};
  // The handshake messages' bytes, gathered from the records that carry them.
  std::string handshake;
  Reader records{bytes};
  while (true) {
    if (records.data.empty()) break;
    if (static_cast<uint8_t>(records.data[0]) != kHandshake) {
      return {ClientHello::State::kNotTls, std::nullopt};
    }
    if (records.data.size() < 5) break;
    records.Number(1);
    const uint32_t version = records.Number(2);
    if ((version >> 8) != 3) return {ClientHello::State::kNotTls, std::nullopt};
    std::string_view payload = records.Vector(2);
    if (!records.ok) break;
    handshake.append(payload);
    if (handshake.size() >= 4) {
      Reader h{handshake};
      if (h.Number(1) != kClientHelloType) return {ClientHello::State::kNotTls, std::nullopt};
      const uint32_t length = h.Number(3);
      if (h.data.size() >= length) break;
    }
  }
  Reader h{handshake};
  if (handshake.size() < 4) return {};
  h.Number(1);
  Reader hello{h.Bytes(h.Number(3))};
  if (!h.ok) return {};  // more records to come
  hello.Number(2);       // legacy_version
  hello.Bytes(32);       // random
  hello.Vector(1);       // legacy_session_id
  hello.Vector(2);       // cipher_suites
  hello.Vector(1);       // legacy_compression_methods
  if (!hello.ok) return {ClientHello::State::kNotTls, std::nullopt};
  ClientHello out{ClientHello::State::kDone, std::nullopt};
  if (hello.data.empty()) return out;  // no extensions
  Reader extensions{hello.Vector(2)};
  while (extensions.ok && !extensions.data.empty()) {
    const uint32_t type = extensions.Number(2);
    std::string_view body = extensions.Vector(2);
    if (extensions.ok && type == kServerNameExtension) {
      // Twice is malformed (RFC 8446 4.2), and two names could each satisfy a different reader.
      if (out.server_name) return {ClientHello::State::kNotTls, std::nullopt};
      out.server_name = HostName(body);
      if (!out.server_name) out.server_name = "";
    }
  }
  if (!extensions.ok || !hello.ok) return {ClientHello::State::kNotTls, std::nullopt};
  return out;
}

}  // namespace ci::daemon
