// Standard base64 (RFC 4648, padded) over OpenSSL's block coder: kubeconfig *-data fields and the
// basic-auth header.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ci::k8s {

std::string Base64Encode(std::string_view bytes);

// Whitespace (line breaks in a wrapped value) is skipped, as Go's decoder does; anything else
// that is not padded base64 gives nullopt.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace ci::k8s
