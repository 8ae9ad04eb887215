// HTTPS to the Kubernetes API server (docs/wire-protocols.md "D. Kubernetes pod exec"): one
// connection per call, TLS 1.2+ from the KubeConfig's ApiServer (CA or the system's trust store,
// the server's name checked as a DNS or IP SAN, an optional client certificate), the
// Authorization header computed per request (a rotated token is sent at once), a deadline on
// every call, and exec as a WebSocket (v5.channel.k8s.io, else v4). Connections are
// core/http_connection.h's; the only translation unit of src/k8s/ that uses Beast.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "k8s/kube_config.h"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace ci::k8s {

namespace asio = boost::asio;

struct ApiResponse {
  int status = 0;
  std::string body;
  bool ok() const { return status >= 200 && status < 300; }
};

// "<what>: <the metav1.Status message, else the body> (HTTP <status>[, reason <reason>])".
Status ApiError(std::string_view what, const ApiResponse& r);

// An upgraded exec connection: whole WebSocket messages, each [channel][payload]
// (exec_protocol.h).
class ExecConnection {
 public:
  virtual ~ExecConnection() = default;
  // The negotiated subprotocol: kProtocolV5 or kProtocolV4.
  virtual std::string_view protocol() const = 0;
  // The next message; nullopt once the server closed the connection (ec-free end), an error
  // for anything else.
  virtual asio::awaitable<Result<std::optional<std::string>>> Read() = 0;
  virtual asio::awaitable<Status> Write(std::string_view message) = 0;
  // Closes at once; a pending Read completes with an error.
  virtual void Close() = 0;
};

// A streaming response read line by line: a watch's body, one JSON WatchEvent per line (the API
// server writes each event as its own chunk, ending in '\n'; a line may still span chunks).
class LineStream {
 public:
  virtual ~LineStream() = default;
  // The next non-empty line, without its '\n'; nullopt once the server ended the response (a
  // watch's timeoutSeconds); an error for a broken connection, a line over 16 MiB, or nothing
  // read within the stream's read timeout ("no data within N ms").
  virtual asio::awaitable<Result<std::optional<std::string>>> Next() = 0;
  // Closes at once; a pending Next completes with an error.
  virtual void Close() = 0;
};

class ApiClient {
 public:
  ApiClient(asio::any_io_executor ex, KubeConfig config, std::chrono::milliseconds timeout);
  ~ApiClient();

  const KubeConfig& config() const { return config_; }

  // One call ("/api/v1/namespaces/ns/pods"); errors are transport errors only: the caller
  // decides which statuses are fine (ApiError for the rest). A PATCH's body is a merge patch. Views
  // only: the caller's strings outlive the call (GCC 12 and temporaries in co_await expressions).
  asio::awaitable<Result<ApiResponse>> Request(std::string_view method, std::string_view path,
                                               std::string_view json_body);

  // GET `path` ("...?watch=1&...") and its body as a stream of lines. The connection stays open
  // for as long as the server sends: each Next waits at most `read_timeout` (not the client's
  // per-call timeout, which still bounds connecting and the response's header). A non-2xx answer
  // is read whole and returned as ApiError("watch <path>", ...).
  asio::awaitable<Result<std::unique_ptr<LineStream>>> Watch(
      std::string_view path, std::chrono::milliseconds read_timeout);

  // GET `target` (exec_protocol.h ExecRequestTarget) upgraded to a WebSocket, offering v5 then
  // v4. A refused upgrade is an error carrying the server's Status message; Gone when the pod
  // is not there (404) or its containers have completed.
  // `declined`, when given, gets the HTTP status of an upgrade the server declined (403: RBAC).
  asio::awaitable<Result<std::unique_ptr<ExecConnection>>> Exec(std::string_view target,
                                                                int* declined = nullptr);

 private:
  asio::any_io_executor ex_;
  KubeConfig config_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<asio::ssl::context> tls_;  // built on first use
};

}  // namespace ci::k8s
