#include "llm/model_call.h"

#include <spdlog/spdlog.h>

#include <utility>
#include <variant>

#include "core/json.h"

namespace ci::llm {
namespace {

constexpr size_t kBodyExcerpt = 300;
constexpr size_t kMaxServerMessage = 1000;  // what a 502 body repeats of the server's words

// At most `n` bytes of `text`, not cutting a UTF-8 sequence (the message ends up in JSON).
std::string Prefix(std::string_view text, size_t n) {
  if (text.size() <= n) return std::string(text);
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return std::string(text.substr(0, n));
}

// The provider's own words: OpenAI, Gemini and vLLM send {"error": {"message": ...}}, Ollama
// and llama.cpp sometimes {"error": "..."}.
std::string ErrorJsonMessage(std::string_view body) {
  rapidjson::Document d;
  std::string why;
  if (!ParseJson(body, d, why) || !d.IsObject() || !d.HasMember("error")) return "";
  const rapidjson::Value& error = d["error"];
  if (error.IsString()) return error.GetString();
  if (error.IsObject() && error.HasMember("message") && error["message"].IsString()) {
    return error["message"].GetString();
  }
  return "";
}

}  // namespace

std::string Redact(std::string_view text, std::string_view secret) {
  std::string out(text);
  if (secret.empty()) return out;
  constexpr std::string_view kRedacted = "[redacted]";
  for (size_t at = out.find(secret); at != std::string::npos;
       at = out.find(secret, at + kRedacted.size())) {
    out.replace(at, secret.size(), kRedacted);
  }
  return out;
}

std::string HttpErrorMessage(int status, std::string_view body, std::string_view secret) {
  const std::string redacted = Redact(body, secret);
  std::string detail = Prefix(ErrorJsonMessage(redacted), kMaxServerMessage);
  if (detail.empty()) detail = Prefix(redacted, kBodyExcerpt);
  return "HTTP " + std::to_string(status) + ": " + detail;
}

boost::asio::awaitable<ModelResult> CallModel(boost::asio::any_io_executor ex,
                                              const ModelEndpoint& endpoint,
                                              std::string_view request_body, AnswerParser parse) {
  if (!endpoint.url.ok()) {
    co_return ModelError{ModelError::Kind::kUnavailable,
                         endpoint.provider + " model server: " + endpoint.url.status().message()};
  }
  const Url& url = endpoint.url.value();
  const auto start = std::chrono::steady_clock::now();
  HttpResult http = co_await PostJson(ex, url, endpoint.headers, request_body, endpoint.timeout);
  const auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);

  ModelResult result;
  if (auto* failure = std::get_if<HttpFailure>(&http)) {
    spdlog::debug("{} POST {}{}: {} after {} ms", endpoint.provider, url.HostPort(), url.path,
                  failure->message, wall.count());
    const ModelError::Kind kind =
        failure->timed_out ? ModelError::Kind::kTimedOut : ModelError::Kind::kUnavailable;
    result = ModelError{kind, endpoint.provider + " model server: " + failure->message};
  } else {
    const HttpReply& reply = std::get<HttpReply>(http);
    spdlog::debug("{} POST {}{}: HTTP {} in {} ms", endpoint.provider, url.HostPort(), url.path,
                  reply.status, wall.count());
    if (reply.status < 200 || reply.status >= 300) {
      result = ModelError{ModelError::Kind::kUnavailable,
                          endpoint.provider + " model server answered " +
                              HttpErrorMessage(reply.status, reply.body, endpoint.api_key),
                          reply.status};
    } else {
      result = parse(reply.body);
    }
  }
  if (auto* reply = std::get_if<Reply>(&result)) reply->wall = wall;
  if (auto* error = std::get_if<ModelError>(&result)) {
    error->message = Redact(error->message, endpoint.api_key);
  }
  co_return result;
}

}  // namespace ci::llm
