// Path patterns of the fronts' route tables (api/handlers.cc, e2b/): literal segments, and
// `{name}` segments that match one non-empty segment, handed to the handler percent-decoded.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ci::daemon {

// The value of the pattern's `{name}` segment ("" when it has none), or nullopt when `path` does
// not match `pattern`.
std::optional<std::string> MatchPath(std::string_view pattern, std::string_view path);

// "%2F" -> "/"; a malformed escape is kept as it is.
std::string PercentDecode(std::string_view s);

// The value of query parameter `name` in a request target ("/v1/tools?format=gemini"),
// percent-decoded ('+' is a space); the first when repeated; nullopt when absent.
std::optional<std::string> QueryParameter(std::string_view target, std::string_view name);

}  // namespace ci::daemon
