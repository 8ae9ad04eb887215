#include "daemon/egress/proxy_messages.h"

#include <charconv>

#include "core/header_text.h"

namespace ci::daemon {

bool ParseAuthority(std::string_view text, uint16_t default_port, std::string* host,
                    uint16_t* port) {
  std::string_view h = text, p;
  if (text.starts_with('[')) {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return false;
    h = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (!rest.starts_with(':')) return false;
      p = rest.substr(1);
    }
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
    if (h.find(':') != std::string_view::npos) return false;  // an IPv6 literal needs brackets
  }
  unsigned value = default_port;
  if (!p.empty()) {
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
    if (ec != std::errc() || end != p.data() + p.size()) return false;
  }
  if (h.empty() || value == 0 || value > 65535) return false;
  *host = AsciiLower(h);
  if (host->ends_with('.')) host->pop_back();
  *port = static_cast<uint16_t>(value);
  return !host->empty();
}

const std::string* Head::Find(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return &v;
  }
  return nullptr;
}

bool ParseHead(std::string_view text, Head* head) {
  size_t eol = text.find("\r\n");
  std::string_view line = text.substr(0, eol);
  const size_t a = line.find(' '), b = line.rfind(' ');
  if (a == std::string_view::npos || a == b) return false;
  head->method = std::string(line.substr(0, a));
  head->target = std::string(line.substr(a + 1, b - a - 1));
  head->version = std::string(line.substr(b + 1));
  if (!head->version.starts_with("HTTP/1.")) return false;
  while (eol != std::string_view::npos && eol + 2 < text.size()) {
    const size_t start = eol + 2;
    eol = text.find("\r\n", start);
    std::string_view field = text.substr(start, eol - start);
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos || colon == 0) return false;
    std::string_view value = field.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    head->headers.emplace_back(AsciiLower(field.substr(0, colon)), std::string(value));
  }
  return true;
}

bool HopByHop(std::string_view name) {
  for (std::string_view h :
       {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate",
        "te", "trailer", "transfer-encoding", "upgrade"}) {
    if (name == h) return true;
  }
  return false;
}

std::string RefusalText(int status, const std::string& reason) {
  const char* text = status == 403   ? "Forbidden"
                     : status == 400 ? "Bad Request"
                     : status == 431 ? "Request Header Fields Too Large"
                     : status == 501 ? "Not Implemented"
                     : status == 502 ? "Bad Gateway"
                                     : "Service Unavailable";
  std::string body = "code-interpreter egress: " + reason + "\n";
  return "HTTP/1.1 " + std::to_string(status) + " " + text +
         "\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: " +
         std::to_string(body.size()) + "\r\nconnection: close\r\n\r\n" + body;
}

std::optional<Refusal> CheckRequest(const Head& head, const std::string& host, uint16_t port,
                                    uint16_t default_port, uint64_t* body) {
  if (const std::string* value = head.Find("host")) {
    std::string h;
    uint16_t p = 0;
    if (!ParseAuthority(*value, default_port, &h, &p) || h != host || p != port) {
      return Refusal{400, "the Host header is not the URL's host"};
    }
  }
  if (head.Find("transfer-encoding") != nullptr) {
    return Refusal{501, "chunked request bodies are not proxied"};
  }
  *body = 0;
  if (const std::string* length = head.Find("content-length")) {
    auto [p, ec] = std::from_chars(length->data(), length->data() + length->size(), *body);
    if (ec != std::errc() || p != length->data() + length->size()) {
      return Refusal{400, "bad Content-Length"};
    }
  }
  return std::nullopt;
}

std::string OutgoingHead(const Head& head, std::string_view path, std::string_view authority,
                         const std::vector<EgressSecret>& secrets) {
  std::string out = head.method + " " + std::string(path) + " HTTP/1.1\r\n";
  for (const auto& [k, v] : head.headers) {
    if (HopByHop(k) || k == "host") continue;
    bool replaced = !secrets.empty() && k == "accept-encoding";
    for (const EgressSecret& s : secrets) replaced = replaced || AsciiLower(s.header) == k;
    if (!replaced) out += k + ": " + v + "\r\n";
  }
  for (const EgressSecret& s : secrets) out += s.header + ": " + s.value + "\r\n";
  if (!secrets.empty()) out += "accept-encoding: identity\r\n";
  out += "host: " + std::string(authority) + "\r\nconnection: close\r\n\r\n";
  return out;
}

AnswerHead ReadAnswerHead(std::string_view raw) {
  AnswerHead out;
  const size_t eol = raw.find("\r\n");
  std::string_view status_line = raw.substr(0, eol);
  out.interim =
      status_line.size() > 9 && status_line.starts_with("HTTP/1.") && status_line[9] == '1';
  out.text = std::string(status_line) + "\r\n";
  bool connection = false;
  for (size_t pos = eol + 2; pos < raw.size();) {
    size_t end = raw.find("\r\n", pos);
    if (end == std::string_view::npos) end = raw.size();
    std::string_view field = raw.substr(pos, end - pos);
    pos = end + 2;
    if (field.empty()) break;
    const size_t colon = field.find(':');
    const std::string name = AsciiLower(field.substr(0, colon));
    std::string value = colon == std::string_view::npos ? "" : AsciiLower(field.substr(colon + 1));
    value.erase(0, value.find_first_not_of(" \t"));
    if (name == "content-encoding" && !value.starts_with("identity")) {
      // Not quoted: what the server sent might be a secret.
      out.problem = "the answer is compressed, so the secrets in it could not be masked";
    }
    if (name == "transfer-encoding") {
      out.chunked = value.find("chunked") != std::string::npos;
      if (!out.chunked) out.problem = "the answer's transfer encoding is not chunked";
      continue;
    }
    if (out.chunked && name == "content-length") continue;
    connection = connection || name == "connection";
    out.text.append(field).append("\r\n");
  }
  if (out.chunked && !connection) out.text += "connection: close\r\n";
  out.text += "\r\n";
  return out;
}

}  // namespace ci::daemon
