// Standard base64 (RFC 4648, padded) over OpenSSL's block coder: kubeconfig *-data fields, the
// basic-auth header, the bytes of E2B's Connect messages.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ci {

std::string Base64Encode(std::string_view bytes);

// Whitespace (line breaks in a wrapped value) is skipped, as Go's decoder does; anything else
// that is not padded base64 gives nullopt.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace ci
