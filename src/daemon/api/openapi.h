// The OpenAPI 3.1 document of the API (docs/openapi.json), compiled into the binary and served at
// GET /openapi.json. tests/daemon/openapi_test.cc keeps it true to ApiHandlers::Routes().
#pragma once

#include <string_view>

namespace ci::daemon {

std::string_view OpenApiDocument();

}  // namespace ci::daemon
