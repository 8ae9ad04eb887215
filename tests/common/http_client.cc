#include "common/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cctype>

namespace ci::testing_support {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

http::request<http::string_body> MakeRequest(const std::string& method, const std::string& target,
                                             const std::string& body,
                                             const std::string& content_type,
                                             const HttpClient::Headers& headers) {
  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::connection, "close");
  if (!body.empty() || method == "POST") {
    req.set(http::field::content_type, content_type);
    req.body() = body;
    req.prepare_payload();
  }
  for (const auto& [name, value] : headers) req.set(name, value);
  return req;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::optional<std::string> HttpReply::Header(const std::string& lower_name) const {
  for (const auto& [k, v] : headers) {
    if (k == lower_name) return v;
  }
  return std::nullopt;
}

HttpReply HttpClient::Send(const std::string& method, const std::string& target,
                           const std::string& body, const std::string& content_type,
                           const Headers& headers) const {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::address_v4::loopback(), port_));
  http::write(socket, MakeRequest(method, target, body, content_type, headers));
  boost::beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  http::read(socket, buffer, parser);
  const auto& res = parser.get();
  HttpReply reply;
  reply.status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    reply.headers.emplace_back(Lower(std::string(field.name_string())), std::string(field.value()));
  }
  reply.body = res.body();
  return reply;
}

HttpReply HttpClient::Upload(const std::string& filename, const std::string& content) const {
  const std::string boundary = "fake-executor-test-boundary";
  std::string body = "--" + boundary +
                     "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" + filename +
                     "\"\r\nContent-Type: application/octet-stream\r\n\r\n" + content + "\r\n--" +
                     boundary + "--\r\n";
  return Send("POST", "/v1/files", body, "multipart/form-data; boundary=" + boundary);
}

struct AbandonedRequest::Socket {
  asio::io_context io;
  tcp::socket socket{io};
};

AbandonedRequest::AbandonedRequest(uint16_t port, const std::string& target,
                                   const std::string& json)
    : socket_(std::make_unique<Socket>()) {
  socket_->socket.connect(tcp::endpoint(asio::ip::address_v4::loopback(), port));
  http::write(socket_->socket, MakeRequest("POST", target, json, "application/json", {}));
}

AbandonedRequest::~AbandonedRequest() { Close(); }

void AbandonedRequest::Close() {
  boost::system::error_code ec;
  socket_->socket.close(ec);
}

}  // namespace ci::testing_support
