#include "daemon/front/router.h"

namespace ci::daemon {

Router::Router(std::vector<Front*> fronts, BrowserPolicy browsers)
    : fronts_(std::move(fronts)), browsers_(std::move(browsers)) {}

void Router::SetApiKeys(ApiKeys* keys) {
  browsers_.check_host = keys == nullptr;
  for (Front* f : fronts_) f->SetApiKeys(keys);
}

boost::asio::awaitable<void> Router::Handle(HttpExchange& ex) {
  ex.client.clear();  // a kept-alive connection's previous request was someone's
  if (std::optional<std::string> refused = RefuseBrowserRequest(ex.head(), browsers_)) {
    co_return co_await ex.Respond(ErrorResponse(403, *refused));
  }
  for (Front* f : fronts_) {
    if (f->Claims(ex.head())) co_return co_await f->Handle(ex);
  }
  co_await ex.Respond(ErrorResponse(404, "Not Found"));
}

}  // namespace ci::daemon
