#include "canned_server.h"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cctype>

namespace ci::llm::test_support {
namespace {

namespace ssl = asio::ssl;
using asio::use_awaitable;
using asio::ip::tcp;
using boost::system::error_code;
using Requests = std::shared_ptr<std::vector<RecordedRequest>>;
using Held = std::shared_ptr<std::vector<std::shared_ptr<void>>>;

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

RecordedRequest ParseHead(const std::string& head) {
  RecordedRequest r;
  size_t at = head.find("\r\n");
  r.request_line = head.substr(0, at);
  while (at != std::string::npos && at + 2 < head.size()) {
    const size_t start = at + 2;
    at = head.find("\r\n", start);
    const std::string line = head.substr(start, at - start);
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    r.headers.emplace_back(Lower(line.substr(0, colon)), value);
  }
  return r;
}

// Reads one request, answers it (or not), then waits for the client to close.
template <typename Stream>
asio::awaitable<void> Serve(std::shared_ptr<Stream> stream, CannedServer::Options options,
                            Requests requests, Held held) {
  error_code ec;
  std::string data;
  const size_t head_end = co_await asio::async_read_until(
      *stream, asio::dynamic_buffer(data), "\r\n\r\n", asio::redirect_error(use_awaitable, ec));
  if (ec) co_return;
  RecordedRequest request = ParseHead(data.substr(0, head_end));
  const size_t length = std::stoul(request.Header("content-length").value_or("0"));
  while (data.size() < head_end + length) {
    char buf[4096];
    const size_t n = co_await stream->async_read_some(asio::buffer(buf),
                                                      asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;
    data.append(buf, n);
  }
  request.body = data.substr(head_end, length);
  requests->push_back(std::move(request));
  if (options.response.empty()) {
    held->push_back(stream);  // open until the server goes
    co_return;
  }
  if (options.delay.count() > 0) {
    asio::steady_timer pause(stream->get_executor(), options.delay);
    co_await pause.async_wait(asio::redirect_error(use_awaitable, ec));
  }
  co_await asio::async_write(*stream, asio::buffer(options.response),
                             asio::redirect_error(use_awaitable, ec));
  // Closing before the client has read everything could reset the connection: the client ends.
  while (!ec) {
    char buf[4096];
    co_await stream->async_read_some(asio::buffer(buf), asio::redirect_error(use_awaitable, ec));
  }
}

asio::awaitable<void> Accept(tcp::acceptor* acceptor, CannedServer::Options options,
                             Requests requests, Held held) {
  for (;;) {
    error_code ec;
    tcp::socket socket = co_await acceptor->async_accept(asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;  // the server is gone: the acceptor must not be touched again
    const asio::any_io_executor ex = socket.get_executor();
    if (options.tls) {
      auto tls = std::make_shared<ssl::stream<tcp::socket>>(std::move(socket), *options.tls);
      co_spawn(
          ex,
          [tls, options, requests, held]() -> asio::awaitable<void> {
            error_code handshake;
            co_await tls->async_handshake(ssl::stream_base::server,
                                          asio::redirect_error(use_awaitable, handshake));
            if (!handshake) co_await Serve(tls, options, requests, held);
          },
          asio::detached);
    } else {
      auto plain = std::make_shared<tcp::socket>(std::move(socket));
      co_spawn(ex, Serve(plain, options, requests, held), asio::detached);
    }
  }
}

}  // namespace

std::optional<std::string> RecordedRequest::Header(const std::string& lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return value;
  }
  return std::nullopt;
}

std::string HttpResponse(int status, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) +
         " Canned\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string ChunkedResponse(int status, const std::vector<std::string>& pieces) {
  std::string out =
      "HTTP/1.1 " + std::to_string(status) +
      " Canned\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const std::string& piece : pieces) {
    char size[32];
    std::snprintf(size, sizeof(size), "%zx\r\n", piece.size());
    out += size + piece + "\r\n";
  }
  return out + "0\r\n\r\n";
}

CannedServer::CannedServer(asio::io_context& io, std::string response,
                           std::shared_ptr<asio::ssl::context> tls, std::chrono::milliseconds delay)
    : acceptor_(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
      requests_(std::make_shared<std::vector<RecordedRequest>>()),
      held_(std::make_shared<std::vector<std::shared_ptr<void>>>()) {
  port_ = acceptor_.local_endpoint().port();
  Options options{std::move(response), std::move(tls), delay};
  co_spawn(io, Accept(&acceptor_, std::move(options), requests_, held_), asio::detached);
}

CannedServer::~CannedServer() {
  error_code ignored;
  acceptor_.close(ignored);
  held_->clear();
}

std::shared_ptr<asio::ssl::context> CannedServer::Tls(const std::string& cert_pem,
                                                      const std::string& key_pem) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ctx->use_certificate_chain(asio::buffer(cert_pem));
  ctx->use_private_key(asio::buffer(key_pem), ssl::context::pem);
  return ctx;
}

uint16_t ClosedPort(asio::io_context& io) {
  tcp::acceptor probe(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const uint16_t port = probe.local_endpoint().port();
  probe.close();
  return port;
}

}  // namespace ci::llm::test_support
