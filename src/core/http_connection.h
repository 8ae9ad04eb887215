// One HTTP/1.1 client connection, the layer under the daemon's three clients (the model's, the
// Kubernetes API's and the Docker Engine's): connect within a deadline over a unix socket, tcp or
// tcp + TLS (core/tls_client.h's context, the peer's name checked), whole exchanges with a body
// cap, bodies read as they arrive, and the raw stream of an upgraded connection. Failures are
// one type saying which step failed; each client words them for its users.
#pragma once

#include <array>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/file_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace ci::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;
using UnixStream = beast::basic_stream<asio::local::stream_protocol>;
using TcpStream = beast::tcp_stream;
using TlsStream = asio::ssl::stream<beast::tcp_stream>;

// Where to connect: a unix socket when `unix_path` is set, else host:port, over TLS when `tls`.
struct Peer {
  std::string unix_path;
  std::string host;  // a name or an address literal (IPv6 without brackets)
  uint16_t port = 0;
  std::shared_ptr<asio::ssl::context> tls;
  std::string tls_name;  // SNI and the name the certificate must carry; "" = host
  bool verify = true;    // false: the certificate's name is not checked (the context's choice)
};

enum class Step { kTlsSetup, kResolve, kConnect, kHandshake, kSend, kRead, kTooLarge };

struct Failure {
  Step step = Step::kConnect;
  boost::system::error_code ec;
  bool timed_out = false;    // the step's deadline passed (whatever error closing it caused)
  std::string verify_error;  // a handshake refused for the peer's certificate: OpenSSL's reason
};

template <typename T>
using Outcome = std::variant<T, Failure>;

using Reply = http::response<http::string_body>;

class Connection {
 public:
  // Resolving (abandoned, not waited for, at the deadline), connecting and the TLS handshake
  // all end by `deadline`; it stays set for what follows until changed.
  static asio::awaitable<Outcome<Connection>> Open(asio::any_io_executor ex, const Peer& peer,
                                                   Clock::time_point deadline);

  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;
  ~Connection();

  void ExpiresAt(Clock::time_point deadline);
  void ExpiresAfter(std::chrono::milliseconds d) { ExpiresAt(Clock::now() + d); }
  void ExpiresNever();

  // Writes the request and reads the whole answer (its body at most `body_limit` bytes; a body
  // the server ends by closing TLS without close_notify is complete).
  asio::awaitable<Outcome<Reply>> Exchange(const http::request<http::string_body>& req,
                                           uint64_t body_limit);

  // Writes the request piece by piece, `before_each_write` (may be empty) re-arming the deadline,
  // and reads the answer's header; its body then comes from ReadBody.
  asio::awaitable<std::optional<Failure>> Start(http::request<http::string_body>& req,
                                                const std::function<void()>& before_each_write);
  asio::awaitable<std::optional<Failure>> Start(http::request<http::file_body>& req,
                                                const std::function<void()>& before_each_write);
  // Start with the deadline left as it is.
  asio::awaitable<std::optional<Failure>> Start(http::request<http::string_body>& req);
  const http::response<http::buffer_body>& header() const;
  // The next bytes of the body as they arrived (possibly none: a chunk header only), valid until
  // the next call; body_done() once the server ended the body.
  asio::awaitable<Outcome<std::string_view>> ReadBody();
  bool body_done() const;

  // After Start's header of an upgraded connection: raw bytes both ways, those already read
  // past the header first. ReadSome returns 0 at the end of the stream (a TLS peer closing
  // without close_notify included).
  asio::awaitable<size_t> ReadSome(asio::mutable_buffer buf, boost::system::error_code& ec);
  asio::awaitable<boost::system::error_code> WriteAll(std::string_view data);
  // Half-close on the socket (under TLS too: no close_notify, which would wait for the peer's).
  void ShutdownSend();
  void Close();

  bool tls() const;
  // The TLS stream itself (a WebSocket's), the connection left empty.
  TlsStream ReleaseTls();

 private:
  using Stream = std::variant<UnixStream, TcpStream, TlsStream>;
  explicit Connection(Stream s);
  template <typename Request>
  asio::awaitable<std::optional<Failure>> StartImpl(Request& req,
                                                    const std::function<void()>& before_each);

  std::unique_ptr<Stream> stream_;
  Clock::time_point deadline_ = Clock::time_point::max();
  beast::flat_buffer buf_;
  std::unique_ptr<http::response_parser<http::buffer_body>> parser_;
  std::unique_ptr<std::array<char, 64 << 10>> chunk_;
};

}  // namespace ci::net
