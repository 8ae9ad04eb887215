// What the providers share around one request: the POST to the model server, the wall time, a
// transport failure or an HTTP error status as a ModelError, the API key redacted from every
// message, one debug log line. The providers only translate bodies.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "llm/conversation.h"
#include "llm/http_client.h"

namespace ci::llm {

struct ModelEndpoint {
  std::string provider;  // "openai": how messages start
  Result<Url> url = Status::Error("no URL");
  std::vector<HttpHeader> headers;  // the key's header among them
  std::string api_key;              // never in a message or a log line
  std::chrono::milliseconds timeout{0};
};

// Reads a 2xx answer's body into a Reply (its wall time set by the caller) or a kMalformed
// ModelError.
using AnswerParser = ModelResult (*)(std::string_view body);

// Every occurrence of `secret` in `text` replaced by "[redacted]" (none for an empty secret).
std::string Redact(std::string_view text, std::string_view secret);

// "HTTP <status>: <error.message of {"error": {...}} or {"error": "..."} (at most 1000 bytes),
// else the body's first 300 bytes>", the body redacted before it is cut, never inside a UTF-8
// sequence.
std::string HttpErrorMessage(int status, std::string_view body, std::string_view secret);

boost::asio::awaitable<ModelResult> CallModel(boost::asio::any_io_executor ex,
                                              const ModelEndpoint& endpoint,
                                              std::string_view request_body, AnswerParser parse);

}  // namespace ci::llm
