#include "daemon/front/request_steps.h"

#include "core/header_text.h"

namespace ci::daemon {
namespace {

// application/json, any case, parameters allowed ("application/json; charset=utf-8").
bool IsJsonContentType(std::string_view type) {
  return EqualsIgnoringCase(TrimHeaderSpace(type.substr(0, type.find(';'))), "application/json");
}

// RFC 6750: a challenge on every 401, with invalid_token when a key was given but is not one.
HttpResponse Unauthorized(const Caller& caller) {
  HttpResponse r = ErrorResponse(401, caller.error);
  r.headers.emplace_back("WWW-Authenticate", caller.wrong_key
                                                 ? "Bearer realm=\"code-interpreter\", "
                                                   "error=\"invalid_token\""
                                                 : "Bearer realm=\"code-interpreter\"");
  return r;
}

}  // namespace

boost::asio::awaitable<bool> Authenticate(ApiKeys* keys, HttpExchange& ex) {
  if (keys == nullptr) co_return true;
  Caller caller = keys->Authenticate(ex.head().Header("authorization"));
  if (!caller.ok()) {
    co_await ex.Respond(Unauthorized(caller));
    co_return false;
  }
  ex.client = std::move(caller.name);
  co_return true;
}

boost::asio::awaitable<std::optional<std::string>> ReadJsonBody(HttpExchange& ex, uint64_t limit_mb,
                                                                ErrorShape error) {
  BodyChunk body = co_await ReadWholeBody(ex, limit_mb << 20);
  if (body.error == BodyError::kTooLarge) {
    co_await ex.Respond(
        error(413, "Request body exceeds maximum of " + std::to_string(limit_mb) + " MB"));
    co_return std::nullopt;
  }
  if (body.error != BodyError::kNone) {
    co_await ex.Respond(error(400, "Invalid request body: incomplete body"));
    co_return std::nullopt;
  }
  // No page can send a JSON content type without the CORS preflight the daemon never answers.
  const std::string_view type = ex.head().Header("content-type").value_or("");
  if (!body.data.empty() && !IsJsonContentType(type)) {
    // Appended, not concatenated: GCC 12's -Wrestrict misreads the temporaries.
    std::string detail =
        "Unsupported Media Type: the body must be JSON sent with 'Content-Type: application/json' "
        "(got ";
    if (type.empty()) {
      detail.append("none");
    } else {
      detail.append("'").append(type).append("'");
    }
    detail.append(")");
    co_await ex.Respond(error(415, detail));
    co_return std::nullopt;
  }
  co_return std::move(body.data);
}

}  // namespace ci::daemon
