// The HTTP/1 messages the egress proxy reads and writes (docs/egress.md "The proxy"): a request's
// head and authority, the checks of a request whatever carried it, the head it leaves with
// (secrets added), a refusal's text, and an answer's head read for masking. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/egress/egress_secrets.h"

namespace ci::daemon {

// "host:port", "[v6]:port", or "host" with `default_port`; false when malformed. The host comes
// back in lower case without a trailing dot.
bool ParseAuthority(std::string_view text, uint16_t default_port, std::string* host,
                    uint16_t* port);

struct Head {
  std::string method, target, version;
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  const std::string* Find(std::string_view name) const;
};

// The request line and headers before "\r\n\r\n"; false when they are not HTTP/1.x.
bool ParseHead(std::string_view text, Head* head);

// Headers of one hop, never forwarded (RFC 9110 7.6.1), and the proxy's own.
bool HopByHop(std::string_view name);

struct Refusal {
  int status = 0;
  std::string reason;
};

// What the proxy sends instead of an answer: a plain-text reason.
std::string RefusalText(int status, const std::string& reason);

// The checks of a request to `host`:`port` whatever carried it: its Host header, if sent, names
// the destination; its body has a Content-Length or none. Sets the body's length.
std::optional<Refusal> CheckRequest(const Head& head, const std::string& host, uint16_t port,
                                    uint16_t default_port, uint64_t* body);

// The request as it leaves, in origin form: without hop-by-hop and Proxy-* headers; with
// secrets, each replaces a client header of its name, and the answer is asked for without
// compression (the redactor reads plain bytes).
std::string OutgoingHead(const Head& head, std::string_view path, std::string_view authority,
                         const std::vector<EgressSecret>& secrets);

// An answer's head (up to its blank line) for a sandbox that must not see secrets: an interim
// (1xx) one passes; a compressed body is refused (the redactor could not see into it); a chunked
// one loses its framing (decoded by the caller, ended by the connection's close).
struct AnswerHead {
  bool interim = false;
  bool chunked = false;
  std::string text;  // as passed on
  std::string problem;
};
AnswerHead ReadAnswerHead(std::string_view raw);

}  // namespace ci::daemon
