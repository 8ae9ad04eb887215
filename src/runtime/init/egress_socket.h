// Init's part of egress (docs/egress.md): the listening socket of the sandbox's proxy, made here
// inside the sandbox's network namespace and handed to the daemon, which accepts on it. The
// namespace keeps no route out; the proxy is the daemon's.
#pragma once

#include <string_view>

namespace ci::runtime {

// Answers kEgressListen (its payload the port, decimal): kEgressSocket with the socket attached,
// or kError saying why. False when the daemon's socket failed.
bool ServeEgressListen(int service_fd, std::string_view payload);

}  // namespace ci::runtime
