// A model server stand-in for the tests: listens on 127.0.0.1 (port 0: the kernel picks one),
// over plain TCP or TLS, on the test's io_context, and answers every request with the same
// bytes (a whole HTTP response as text, so tests can send chunked or oversized answers), after
// an optional pause, or never. It records each request it read.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ci::llm::test_support {

namespace asio = boost::asio;

struct RecordedRequest {
  std::string request_line;                                  // "POST /v1/chat/completions HTTP/1.1"
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  std::optional<std::string> Header(const std::string& lower_name) const;
};

// "HTTP/1.1 <status> X\r\nContent-Type: application/json\r\nContent-Length: N\r\n\r\n<body>".
std::string HttpResponse(int status, const std::string& body);
// The same with Transfer-Encoding: chunked, one chunk per piece.
std::string ChunkedResponse(int status, const std::vector<std::string>& pieces);

class CannedServer {
 public:
  struct Options {
    std::string response;  // empty: never answer (read the request, keep the connection open)
    std::shared_ptr<asio::ssl::context> tls;  // null: plain TCP
    std::chrono::milliseconds delay{0};       // before answering
  };

  // `response` "" never answers (a TLS client then waits for its handshake in vain: the server
  // is waiting for a request's end that a ClientHello does not hold).
  CannedServer(asio::io_context& io, std::string response,
               std::shared_ptr<asio::ssl::context> tls = nullptr,
               std::chrono::milliseconds delay = std::chrono::milliseconds(0));
  ~CannedServer();

  uint16_t port() const { return port_; }
  const std::vector<RecordedRequest>& requests() const { return *requests_; }

  // A TLS server context with this certificate chain and key.
  static std::shared_ptr<asio::ssl::context> Tls(const std::string& cert_pem,
                                                 const std::string& key_pem);

 private:
  asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::shared_ptr<std::vector<RecordedRequest>> requests_;
  std::shared_ptr<std::vector<std::shared_ptr<void>>> held_;  // silent connections, kept open
};

// A port on 127.0.0.1 where nothing listens (bound, then closed).
uint16_t ClosedPort(asio::io_context& io);

}  // namespace ci::llm::test_support
