// HTTP/1.1 to the Docker Engine API (wire-protocols.md A.0): one connection per call over the
// unix socket, tcp or tcp + TLS (client certificate, wire-protocols.md B), the API version
// negotiated from /_ping, a deadline on every call, and hijacked connections for exec start.
// Connections are core/http_connection.h's; the only translation unit of src/docker/ using Beast.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "docker/endpoint.h"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace ci::docker {

namespace asio = boost::asio;

// The client's highest and lowest API versions (wire-protocols.md A.0 "Negotiation").
inline constexpr int kMaxApiVersion = 150;
inline constexpr int kMinApiVersion = 141;

struct Response {
  int status = 0;
  std::string body;
  std::string api_version;  // the Api-Version header, when sent
  bool ok() const { return status >= 200 && status < 300; }
};

// "<what>: <message of the {"message"} body, else the body text> (HTTP <status>)".
Status HttpError(const std::string& what, const Response& r);

// One line of a streamed answer (without its '\n'); false stops reading.
using LineSink = std::function<bool(std::string_view line)>;

// Longer lines of a streamed answer are cut to this length (the rest of the line is dropped).
inline constexpr size_t kMaxStreamLine = 256 << 10;

// A hijacked connection (exec start): raw bytes both ways, already past the HTTP headers.
class RawStream {
 public:
  virtual ~RawStream() = default;
  // Reads some bytes; returns 0 at end of stream (ec is set on errors other than EOF).
  virtual asio::awaitable<size_t> ReadSome(asio::mutable_buffer buf,
                                           boost::system::error_code& ec) = 0;
  virtual asio::awaitable<Status> WriteAll(std::string_view data) = 0;
  // Half-close: the daemon closes the process's stdin and keeps sending output. Over TLS, like
  // the docker CLI (moby's tlsClientCon.CloseWrite), the tcp connection is half-closed under the
  // TLS session (no close_notify), which the daemon reads as the end of stdin.
  virtual void ShutdownSend() = 0;
  // Closes both directions at once; a pending ReadSome completes with an error.
  virtual void Close() = 0;
};

class EngineClient {
 public:
  EngineClient(asio::any_io_executor ex, Endpoint endpoint, std::chrono::milliseconds timeout);

  // GET /_ping; version = min(daemon Api-Version, 1.50), or DOCKER_API_VERSION when set; refuses
  // a daemon below 1.41. Must succeed before Request/Hijack are used. With TLS, the first call
  // loads the certificates from endpoint.cert_path (errors name the files and the endpoint).
  asio::awaitable<Status> Negotiate();
  const std::string& api_version() const { return api_version_; }
  const Endpoint& endpoint() const { return endpoint_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // One call on the versioned path ("/containers/create?name=x"). Errors are transport errors
  // only: the caller decides which statuses are fine (HttpError for the rest). `timeout` 0 means
  // the client's default.
  // Views only (GCC 12 mishandles class temporaries in co_await expressions): the caller's
  // strings outlive the call.
  asio::awaitable<Result<Response>> Request(std::string_view method, std::string_view path,
                                            std::string_view json_body = {},
                                            std::chrono::milliseconds timeout = {});
  // A call whose 2xx answer is a stream of lines read as it arrives (image pull progress, chunked):
  // each line goes to `on_line` at once; when it returns false the connection is closed (for a
  // pull, that cancels it). A non-2xx answer's body is returned in the Response (up to 1 MiB),
  // a 2xx one's is left empty. `total` bounds the whole call, `idle` each wait for more bytes.
  // Views and references only, as for Request: `on_line` is the caller's named local.
  asio::awaitable<Result<Response>> StreamLines(std::string_view method, std::string_view path,
                                                const LineSink& on_line,
                                                std::chrono::milliseconds total,
                                                std::chrono::milliseconds idle);
  // StreamLines for a POST whose body is the file at `file` (an image import's tar), sent as it
  // is read. The idle bound also covers each write of the body.
  asio::awaitable<Result<Response>> UploadFile(std::string_view path, std::string_view file,
                                               std::string_view content_type,
                                               const LineSink& on_line,
                                               std::chrono::milliseconds total,
                                               std::chrono::milliseconds idle);
  // POST with `Connection: Upgrade, Upgrade: tcp`; on 101 or 200 returns the raw stream (bytes
  // read past the headers come first). The headers are bounded by the timeout, the stream not.
  asio::awaitable<Result<std::unique_ptr<RawStream>>> Hijack(std::string_view path,
                                                             std::string_view json_body);

 private:
  asio::any_io_executor ex_;
  Endpoint endpoint_;
  std::chrono::milliseconds timeout_;
  std::string api_version_;
  std::shared_ptr<asio::ssl::context> tls_;  // loaded by the first call when endpoint_.tls
};

}  // namespace ci::docker
