// RFC 3339 times, as the Kubernetes API and the E2B protocol write them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ci {

// 1700000000 -> "2023-11-14T22:13:20Z".
std::string Rfc3339(int64_t unix_seconds);

// "2026-12-01T15:15:34Z" -> unix seconds; -1 when it is not that form. Fractions and offsets
// are accepted.
int64_t ParseRfc3339(std::string_view text);

}  // namespace ci
