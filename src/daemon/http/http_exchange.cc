#include "daemon/http/http_exchange.h"

#include "core/json.h"

namespace ci::daemon {

asio::awaitable<BodyChunk> ReadWholeBody(HttpExchange& ex, uint64_t max_total) {
  BodyChunk all;
  for (;;) {
    BodyChunk c = co_await ex.ReadBodyChunk(max_total);
    if (c.error != BodyError::kNone) co_return c;
    all.data += c.data;
    if (c.end) break;
  }
  all.end = true;
  co_return all;
}

HttpResponse JsonResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse ErrorResponse(int status, std::string_view detail) {
  return JsonResponse(status, "{\"detail\":" + JsonQuote(detail) + "}");
}

HttpResponse MethodNotAllowed(std::string allow) {
  HttpResponse r = ErrorResponse(405, "Method Not Allowed");
  r.headers.emplace_back("Allow", std::move(allow));
  return r;
}

HttpResponse NoContent() {
  HttpResponse r;
  r.status = 204;
  r.content_type.clear();  // no body, no type (E2B's SDK would try to parse one)
  return r;
}

}  // namespace ci::daemon
