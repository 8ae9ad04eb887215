// Ids that grant access to something (sessions, files, MCP sessions) appear in logs only as a
// prefix: enough to follow one through the log, not enough to use it.
#pragma once

#include <string>
#include <string_view>

namespace ci {

// The id with its random part cut after 8 hex digits, and "...": "0f3c2a1b...",
// "code-session-75140f47...".
std::string ShortId(std::string_view id);
// `text` (a request target, say) with every UUID and every run of 32 or more hex digits in it
// shortened as ShortId does.
std::string WithShortIds(std::string_view text);

}  // namespace ci
