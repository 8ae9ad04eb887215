#include "daemon/e2b/connect_rpc.h"

#include <array>
#include <cstdlib>
#include <utility>

#include "core/base64.h"
#include "core/json.h"

namespace ci::daemon::e2b {
namespace {

std::string Framed(uint8_t flags, std::string_view json) {
  std::string out;
  out.reserve(5 + json.size());
  out.push_back(static_cast<char>(flags));
  for (int shift = 24; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((json.size() >> shift) & 0xff));
  }
  out += json;
  return out;
}

std::string ErrorJson(std::string_view code, std::string_view message) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "code", code);
    WriteField(w, "message", message);
    w.EndObject();
  });
}

constexpr uint8_t kEndStream = 0x02;
constexpr uint8_t kCompressed = 0x01;

}  // namespace

int ConnectHttpStatus(std::string_view code) {
  static constexpr std::array<std::pair<std::string_view, int>, 16> kStatus = {{
      {"canceled", 499},
      {"unknown", 500},
      {"invalid_argument", 400},
      {"deadline_exceeded", 504},
      {"not_found", 404},
      {"already_exists", 409},
      {"permission_denied", 403},
      {"resource_exhausted", 429},
      {"failed_precondition", 400},
      {"aborted", 409},
      {"out_of_range", 400},
      {"unimplemented", 501},
      {"internal", 500},
      {"unavailable", 503},
      {"data_loss", 500},
      {"unauthenticated", 401},
  }};
  for (const auto& [name, status] : kStatus) {
    if (name == code) return status;
  }
  return 500;
}

HttpResponse ConnectError(std::string_view code, std::string_view message) {
  return JsonResponse(ConnectHttpStatus(code), ErrorJson(code, message));
}

std::string Envelope(std::string_view json) { return Framed(0, json); }

std::string EndOfStream() { return Framed(kEndStream, "{}"); }

std::string EndOfStream(std::string_view code, std::string_view message) {
  return Framed(kEndStream, "{\"error\":" + ErrorJson(code, message) + "}");
}

HttpResponse ConnectStreamError(std::string_view code, std::string_view message) {
  HttpResponse r;
  r.content_type = "application/connect+json";
  r.body = EndOfStream(code, message);
  return r;
}

std::optional<std::string> UnwrapEnvelope(std::string_view body, std::string* why) {
  if (body.size() < 5) {
    *why = "the request is not a Connect envelope (5-byte prefix, then the message)";
    return std::nullopt;
  }
  const auto flags = static_cast<uint8_t>(body[0]);
  uint32_t length = 0;
  for (int i = 1; i < 5; ++i) length = (length << 8) | static_cast<uint8_t>(body[i]);
  if (flags & kCompressed) {
    *why = "compressed messages are not supported (send JSON uncompressed)";
    return std::nullopt;
  }
  if (flags != 0) {
    *why = "the request's envelope has flags " + std::to_string(flags) + " (0 expected)";
    return std::nullopt;
  }
  if (length != body.size() - 5) {
    *why = "the envelope says " + std::to_string(length) + " bytes, and " +
           std::to_string(body.size() - 5) + " follow (one message is expected)";
    return std::nullopt;
  }
  return std::string(body.substr(5));
}

std::optional<std::string> DecodeProtoBytes(std::string_view text) {
  std::string standard(text);
  for (char& c : standard) {
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  while (standard.size() % 4 != 0) standard.push_back('=');
  return Base64Decode(standard);
}

std::chrono::seconds KeepaliveInterval(const HttpRequestHead& head) {
  constexpr std::chrono::seconds kEnvdDefault(90);
  auto h = head.Header("keepalive-ping-interval");
  if (!h) return kEnvdDefault;
  const long n = std::strtol(std::string(*h).c_str(), nullptr, 10);
  return n > 0 && n <= 3600 ? std::chrono::seconds(n) : kEnvdDefault;
}

std::chrono::milliseconds ConnectTimeout(const HttpRequestHead& head) {
  auto h = head.Header("connect-timeout-ms");
  if (!h) return std::chrono::milliseconds(0);
  const long long n = std::strtoll(std::string(*h).c_str(), nullptr, 10);
  return std::chrono::milliseconds(n > 0 ? n : 0);
}

}  // namespace ci::daemon::e2b
