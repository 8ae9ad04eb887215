// Requests a web browser makes for a page (issue #30 item 5). The daemon serves no page and no
// CORS headers, yet any site can make a browser send it a "simple" cross-origin POST (text/plain,
// the answer unread but the code run), and a site whose name was rebound to this host's address
// makes same-origin requests carrying its own name as Host. Refused here, before routing, for
// every route: an Origin that is not allowed, and (without API keys) a Host that does not name
// this server. JSON routes also require a JSON content type (request_parsing.h), which no simple
// request can carry.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/http/http_exchange.h"

namespace ci::daemon {

struct BrowserPolicy {
  // ALLOWED_ORIGINS: origins ("https://ui.example:8443") whose pages may send requests, or "*";
  // loopback origins (a local tool's UI) always may.
  std::vector<std::string> allowed_origins;
  // ALLOWED_HOSTS: names the Host header may carry, or "*". Checked only without API keys (a
  // key is what a rebound page lacks); loopback names are always allowed, and so is every name
  // when the server listens on all addresses and the list is empty.
  std::vector<std::string> allowed_hosts;
  bool check_host = false;
  std::string listen_host;  // HOST
};

// nullopt when the request may go on; else why it is refused (a 403's detail).
std::optional<std::string> RefuseBrowserRequest(const HttpRequestHead& head,
                                                const BrowserPolicy& policy);

}  // namespace ci::daemon
