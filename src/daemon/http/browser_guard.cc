#include "daemon/http/browser_guard.h"

#include <algorithm>

#include "core/header_text.h"

namespace ci::daemon {
namespace {

bool Listed(const std::vector<std::string>& list, std::string_view value) {
  return std::any_of(list.begin(), list.end(), [&](const std::string& allowed) {
    return allowed == "*" || EqualsIgnoringCase(allowed, value);
  });
}

// "name:port", "[v6]:port" -> "name", "[v6]".
std::string_view WithoutPort(std::string_view authority) {
  if (authority.starts_with("[")) return authority.substr(0, authority.find(']') + 1);
  return authority.substr(0, authority.find(':'));
}

bool IsWildcard(std::string_view listen_host) {
  return listen_host.empty() || listen_host == "0.0.0.0" || listen_host == "::" ||
         listen_host == "[::]";
}

// "localhost", "127.0.0.1", "[::1]" and the rest of 127.0.0.0/8 (a host part, any case).
bool IsLoopbackHost(std::string_view host) {
  const bool ipv4 =
      host.starts_with("127.") && host.find_first_not_of("0123456789.") == std::string_view::npos;
  return ipv4 || host == "[::1]" || EqualsIgnoringCase(host, "localhost");
}

// The host part of an Origin ("http://[::1]:3000" -> "[::1]"), or "" for an opaque one ("null").
std::string_view OriginHost(std::string_view origin) {
  const size_t scheme_end = origin.find("://");
  if (scheme_end == std::string_view::npos) return {};
  return WithoutPort(origin.substr(scheme_end + 3));
}

}  // namespace

std::optional<std::string> RefuseBrowserRequest(const HttpRequestHead& head,
                                                const BrowserPolicy& policy) {
  if (std::optional<std::string_view> origin = head.Header("origin")) {
    if (!IsLoopbackHost(OriginHost(*origin)) && !Listed(policy.allowed_origins, *origin)) {
      return "Forbidden: requests from pages of origin '" + std::string(*origin) +
             "' are refused (a browser sent it for another site); list the origin in "
             "ALLOWED_ORIGINS to allow it";
    }
  }
  if (!policy.check_host) return std::nullopt;
  std::optional<std::string_view> host_header = head.Header("host");
  if (!host_header) return std::nullopt;  // HTTP/1.0: no browser sends none
  const std::string_view host = WithoutPort(*host_header);
  if (IsLoopbackHost(host) || Listed(policy.allowed_hosts, host)) return std::nullopt;
  if (IsWildcard(policy.listen_host) && policy.allowed_hosts.empty()) return std::nullopt;
  if (EqualsIgnoringCase(host, policy.listen_host) ||
      EqualsIgnoringCase(host, "[" + policy.listen_host + "]")) {
    return std::nullopt;  // the address it listens on (an IPv6 one in brackets)
  }
  return "Forbidden: Host '" + std::string(*host_header) +
         "' does not name this server (without API keys only the listening address, loopback "
         "names and ALLOWED_HOSTS are served: a rebound DNS name is refused); list it in "
         "ALLOWED_HOSTS to allow it";
}

}  // namespace ci::daemon
