// A small blocking HTTP/1.1 client for tests that talk to a daemon on a loopback port: one
// connection per request, the whole response read (chunked bodies decoded).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ci::testing_support {

struct HttpReply {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  std::optional<std::string> Header(const std::string& lower_name) const;
};

class HttpClient {
 public:
  explicit HttpClient(uint16_t port) : port_(port) {}
  using Headers = std::vector<std::pair<std::string, std::string>>;
  // `headers` are set last (a "host" one replaces the default 127.0.0.1).
  HttpReply Send(const std::string& method, const std::string& target, const std::string& body = "",
                 const std::string& content_type = "application/json",
                 const Headers& headers = {}) const;
  HttpReply Get(const std::string& target) const { return Send("GET", target); }
  HttpReply Post(const std::string& target, const std::string& json) const {
    return Send("POST", target, json);
  }
  HttpReply Delete(const std::string& target) const { return Send("DELETE", target); }
  // POST /v1/files with one multipart "file" part.
  HttpReply Upload(const std::string& filename, const std::string& content) const;

 private:
  uint16_t port_;
};

// A request whose connection the test closes before the answer (a client that left).
class AbandonedRequest {
 public:
  AbandonedRequest(uint16_t port, const std::string& target, const std::string& json);
  ~AbandonedRequest();
  void Close();

 private:
  struct Socket;
  std::unique_ptr<Socket> socket_;
};

}  // namespace ci::testing_support
