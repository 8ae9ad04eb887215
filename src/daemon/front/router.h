// The HTTP server's one handler: what every request gets whichever protocol it speaks (the
// browser guard, the previous request's caller forgotten), then the first front that claims it.
#pragma once

#include <vector>

#include "daemon/front/front.h"
#include "daemon/http/browser_guard.h"

namespace ci::daemon {

class Router {
 public:
  // `fronts` in claiming order; the last one should claim everything (its 404 is the daemon's).
  Router(std::vector<Front*> fronts, BrowserPolicy browsers);
  boost::asio::awaitable<void> Handle(HttpExchange& ex);
  // Given to every front; with keys, Host is no longer checked (a key is what a rebound page
  // lacks).
  void SetApiKeys(ApiKeys* keys);

 private:
  std::vector<Front*> fronts_;
  BrowserPolicy browsers_;
};

}  // namespace ci::daemon
