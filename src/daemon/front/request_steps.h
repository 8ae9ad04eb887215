// Steps the fronts share before a handler runs: the caller's API key, and a JSON body within the
// request size limit. Each answers the refusal itself (401, 413, 400, 415), in the error shape
// {"detail"} unless the front gives its own.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "daemon/auth/api_keys.h"
#include "daemon/http/http_exchange.h"

namespace ci::daemon {

// With `keys`, the bearer key of the Authorization header names the caller (ex.client); false
// after answering 401. Without keys, true.
boost::asio::awaitable<bool> Authenticate(ApiKeys* keys, HttpExchange& ex);

// A front's error answer: status and message -> response.
using ErrorShape = HttpResponse (*)(int status, std::string_view message);

// The body within `limit_mb`, sent as application/json when not empty; nullopt after answering.
boost::asio::awaitable<std::optional<std::string>> ReadJsonBody(HttpExchange& ex, uint64_t limit_mb,
                                                                ErrorShape error = ErrorResponse);

}  // namespace ci::daemon
