// An API front: one protocol the daemon speaks over its HTTP (the onyx-compatible REST API, MCP,
// next E2B), over the one service layer. The router (router.h) hands each request to the first
// front that claims it; a new front is a folder and a line in Daemon's list.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string_view>

#include "daemon/auth/api_keys.h"
#include "daemon/http/http_exchange.h"

namespace ci::daemon {

// A method and path pattern a front serves (api/routes.h patterns), for its description.
struct RouteSpec {
  std::string_view method;
  std::string_view pattern;
};

class Front {
 public:
  virtual ~Front() = default;
  // Whether this front answers the request: by its path, or (E2B's sandbox hosts) by Host.
  virtual bool Claims(const HttpRequestHead& head) const = 0;
  // Answers it; `ex.client` is empty until the front authenticates the caller.
  virtual boost::asio::awaitable<void> Handle(HttpExchange& ex) = 0;
  // Requests then need a key of `keys`; nullptr: none do.
  virtual void SetApiKeys(ApiKeys* keys) = 0;
};

}  // namespace ci::daemon
