// A small HTTP/1.1 client for talking to a model server: one POST per connection, http:// or
// https:// (TLS 1.2+, always verified against the system's trust store and the URL's host), the
// whole exchange bounded by one deadline, the answer's body capped; over core/http_connection.h.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/status.h"

namespace ci::llm {

struct Url {
  std::string scheme;  // "http" | "https"
  std::string host;    // "api.openai.com", "127.0.0.1", "::1" (an IPv6 literal, no brackets)
  uint16_t port = 0;   // 80 or 443 unless the URL names one
  std::string path;    // "/v1/chat/completions", or "" for none

  bool tls() const { return scheme == "https"; }
  // "host:port", "[::1]:port": how messages name the server.
  std::string HostPort() const;
};

// "https://host[:port][/path]": lower-case scheme http or https, no user info, query or
// fragment, no whitespace or control characters. An error says what is wrong with the text.
Result<Url> ParseUrl(std::string_view text);

struct HttpHeader {
  std::string name;
  std::string value;
};

struct HttpReply {
  int status = 0;
  std::string body;
};

// Why there is no reply. `message` names the server (host:port) and the step that failed:
// "connect to 127.0.0.1:8080: Connection refused".
struct HttpFailure {
  bool timed_out = false;  // the deadline passed first (the caller's 504, not 502)
  std::string message;
};

using HttpResult = std::variant<HttpReply, HttpFailure>;

inline constexpr size_t kMaxReplyBody = 16 << 20;

// POSTs `json_body` to `url` with the given extra headers (Host, Content-Type, Accept and
// User-Agent are set here) and reads the whole reply, whatever its status: resolving,
// connecting, the TLS handshake, writing and reading all end within `timeout` together. The
// trust store is loaded per request, so SSL_CERT_FILE / SSL_CERT_DIR apply at once. Views only:
// the caller's objects outlive the call (GCC 12 and temporaries in co_await expressions).
boost::asio::awaitable<HttpResult> PostJson(boost::asio::any_io_executor ex, const Url& url,
                                            const std::vector<HttpHeader>& headers,
                                            std::string_view json_body,
                                            std::chrono::milliseconds timeout);

}  // namespace ci::llm
