// The HTTP layer as handlers see it: plain request/response values and a few streaming verbs.
// The Beast adapter (http_server.cc) implements it; handlers never see Beast.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ci::daemon {

namespace asio = boost::asio;

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequestHead {
  std::string method;  // "GET"
  std::string target;  // "/v1/files/abc?x=1"
  std::string path;    // "/v1/files/abc" (percent-decoding is the handler's business)
  HeaderList headers;  // names lower-cased
  std::optional<uint64_t> content_length;
  std::string request_id;

  std::optional<std::string_view> Header(std::string_view lower_name) const {
    for (const auto& [k, v] : headers) {
      if (k == lower_name) return v;
    }
    return std::nullopt;
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  HeaderList headers;
  std::string body;
  std::string file_path;  // when set, the body is this file's bytes, streamed from disk
};

// Why a body read failed, so the handler can answer 413 rather than 400.
enum class BodyError { kNone, kTooLarge, kBadRequest, kClientGone };

struct BodyChunk {
  BodyError error = BodyError::kNone;
  std::string data;  // empty with kNone: end of body
  bool end = false;
};

class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  virtual const HttpRequestHead& head() const = 0;
  // The body in pieces as they arrive, never more than `max_total` bytes in all.
  virtual asio::awaitable<BodyChunk> ReadBodyChunk(uint64_t max_total) = 0;
  virtual asio::awaitable<void> Respond(HttpResponse response) = 0;

  // Streaming responses (SSE): chunked transfer encoding; the connection closes after EndStream.
  virtual asio::awaitable<Status> BeginStream(int status, HeaderList headers) = 0;
  virtual asio::awaitable<Status> WriteStream(std::string data) = 0;
  virtual asio::awaitable<void> EndStream() = 0;

  // Calls `on_gone` once if the client closes its connection while the request runs (used to
  // kill an execution nobody waits for). UnwatchClient stops watching before the next response.
  virtual void WatchClient(std::function<void()> on_gone) = 0;
  virtual asio::awaitable<void> UnwatchClient() = 0;

  // Who calls: the name of the API key the request carried (daemon/auth/api_keys.h), set by the
  // router before the handler runs; "" when the daemon has no keys. Files and sessions are
  // the caller's own.
  std::string client;
};

// Reads the whole body into a string (for JSON endpoints).
asio::awaitable<BodyChunk> ReadWholeBody(HttpExchange& ex, uint64_t max_total);

HttpResponse JsonResponse(int status, std::string body);
HttpResponse ErrorResponse(int status, std::string_view detail);  // {"detail": "..."}
HttpResponse MethodNotAllowed(std::string allow);                 // 405 with Allow
HttpResponse NoContent();                                         // 204

}  // namespace ci::daemon
