// The server name a TLS client asks for (SNI), read from its ClientHello by the egress proxy, which
// checks it against the host of the CONNECT that opened the tunnel.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ci::daemon {

struct ClientHello {
  enum class State { kNeedMore, kDone, kNotTls };
  State state = State::kNeedMore;
  std::optional<std::string> server_name;  // kDone: the host_name of server_name, if sent
};

// The first bytes a client sent in a tunnel: a ClientHello (possibly spread over several
// handshake records) once complete, kNeedMore before, kNotTls for anything else (another
// protocol, a malformed hello, more than kMaxClientHello bytes).
ClientHello ParseClientHello(std::string_view bytes);

inline constexpr size_t kMaxClientHello = 64 * 1024;

}  // namespace ci::daemon
