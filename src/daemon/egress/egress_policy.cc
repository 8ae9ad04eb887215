#include "daemon/egress/egress_policy.h"

#include <algorithm>
#include <array>
#include <charconv>

#include "core/header_text.h"

namespace ci::daemon {
namespace {

using boost::asio::ip::address;
using boost::asio::ip::address_v4;
using boost::asio::ip::address_v6;

// A host name as DNS allows it: labels of letters, digits, '-' and '_', 1-63 bytes each.
bool IsHostName(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  size_t label = 0;
  for (char c : name) {
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
      continue;
    }
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
    if (!ok || ++label > 63) return false;
  }
  return label != 0;
}

std::array<uint8_t, 16> Bytes16(const address& a) {
  if (a.is_v6()) return a.to_v6().to_bytes();
  std::array<uint8_t, 16> out{};
  out[10] = out[11] = 0xff;
  const auto v4 = a.to_v4().to_bytes();
  std::copy(v4.begin(), v4.end(), out.begin() + 12);
  return out;
}

// The address as IPv4 when it is one or maps one.
address Unmapped(const address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, a.to_v6());
  }
  return a;
}

bool InNetwork(const address& a, const address& network, unsigned prefix) {
  const address x = Unmapped(a), n = Unmapped(network);
  if (x.is_v4() != n.is_v4()) return false;
  auto xb = Bytes16(x), nb = Bytes16(n);
  const unsigned bits = n.is_v4() ? prefix + 96 : prefix;
  for (unsigned i = 0; i < bits; ++i) {
    const uint8_t mask = static_cast<uint8_t>(0x80u >> (i % 8));
    if ((xb[i / 8] & mask) != (nb[i / 8] & mask)) return false;
  }
  return true;
}

// Whether `name` is a subdomain of `suffix` (what "*.suffix" matches).
bool Subdomain(std::string_view name, std::string_view suffix) {
  return name.size() > suffix.size() + 1 && name.ends_with(suffix) &&
         name[name.size() - suffix.size() - 1] == '.';
}

bool PortMatches(const std::optional<uint16_t>& rule, uint16_t port) {
  return !rule || *rule == port;
}

bool PortInside(const std::optional<uint16_t>& inner, const std::optional<uint16_t>& outer) {
  return !outer || (inner && *inner == *outer);
}

Result<uint16_t> ParsePort(std::string_view text, std::string_view rule) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535) {
    return Status::Error("'" + std::string(rule) + "': the port must be 1-65535");
  }
  return static_cast<uint16_t>(value);
}

}  // namespace

bool EgressRule::MatchesName(std::string_view name, uint16_t p) const {
  if (!PortMatches(port, p)) return false;
  const std::string n = AsciiLower(name);
  if (kind == Kind::kDomain) return n == domain;
  return kind == Kind::kWildcard && Subdomain(n, domain);
}

bool EgressRule::MatchesAddress(const address& a, uint16_t p) const {
  return kind == Kind::kCidr && PortMatches(port, p) && InNetwork(a, network, prefix);
}

bool EgressRule::Inside(const EgressRule& outer) const {
  if (!PortInside(port, outer.port)) return false;
  switch (kind) {
    case Kind::kDomain:
      return (outer.kind == Kind::kDomain && outer.domain == domain) ||
             (outer.kind == Kind::kWildcard && Subdomain(domain, outer.domain));
    case Kind::kWildcard:
      return outer.kind == Kind::kWildcard &&
             (outer.domain == domain || Subdomain(domain, outer.domain));
    case Kind::kCidr:
      return outer.kind == Kind::kCidr &&
             Unmapped(network).is_v4() == Unmapped(outer.network).is_v4() &&
             prefix >= outer.prefix && InNetwork(network, outer.network, outer.prefix);
  }
  return false;
}

std::string EgressRule::ToString() const {
  std::string out;
  if (kind == Kind::kCidr) {
    const address n = Unmapped(network);
    out = n.is_v6() && port ? "[" + n.to_string() + "]" : n.to_string();
    out += "/" + std::to_string(prefix);
  } else {
    out = (kind == Kind::kWildcard ? "*." : "") + domain;
  }
  if (port) out += ":" + std::to_string(*port);
  return out;
}

Result<EgressRule> ParseEgressRule(std::string_view text) {
  EgressRule rule;
  std::string_view host = text;
  std::string unbracketed;
  // The port: after the last ':' of a name or IPv4 rule, after "]" of a bracketed IPv6 one.
  if (host.starts_with('[')) {
    const size_t close = host.find(']');
    if (close == std::string_view::npos) {
      return Status::Error("'" + std::string(text) + "': no ']' after the IPv6 address");
    }
    std::string_view rest = host.substr(close + 1);
    host = host.substr(1, close - 1);
    // "[addr]/len" or "[addr/len]", then an optional ":port".
    std::string_view prefix_part;
    if (rest.starts_with('/')) {
      const size_t colon = rest.find(':');
      prefix_part = rest.substr(0, colon);
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon);
    }
    if (!rest.empty()) {
      if (!rest.starts_with(':')) return Status::Error("'" + std::string(text) + "': bad port");
      auto port = ParsePort(rest.substr(1), text);
      if (!port.ok()) return port.status();
      rule.port = *port;
    }
    unbracketed = std::string(host) + std::string(prefix_part);
    host = unbracketed;
  } else if (std::count(host.begin(), host.end(), ':') == 1) {
    const size_t colon = host.find(':');
    auto port = ParsePort(host.substr(colon + 1), text);
    if (!port.ok()) return port.status();
    rule.port = *port;
    host = host.substr(0, colon);
  }
  const size_t slash = host.find('/');
  boost::system::error_code ec;
  const address literal = boost::asio::ip::make_address(host.substr(0, slash), ec);
  if (!ec) {
    const address a = Unmapped(literal);
    rule.kind = EgressRule::Kind::kCidr;
    rule.network = a;
    rule.prefix = a.is_v4() ? 32 : 128;
    if (slash != std::string_view::npos) {
      unsigned prefix = 0;
      std::string_view p = host.substr(slash + 1);
      auto [end, pec] = std::from_chars(p.data(), p.data() + p.size(), prefix);
      if (pec != std::errc() || end != p.data() + p.size() || prefix > rule.prefix) {
        return Status::Error("'" + std::string(text) + "': the prefix length must be 0-" +
                             std::to_string(rule.prefix));
      }
      rule.prefix = prefix;
    }
    return rule;
  }
  if (slash != std::string_view::npos) {
    return Status::Error("'" + std::string(text) + "': not an IP network");
  }
  std::string name = AsciiLower(host);
  if (name.ends_with('.')) name.pop_back();
  if (name.starts_with("*.")) {
    rule.kind = EgressRule::Kind::kWildcard;
    name.erase(0, 2);
  }
  if (!IsHostName(name) || name.find('*') != std::string::npos) {
    return Status::Error("'" + std::string(text) +
                         "' is not a domain, a '*.' wildcard or a CIDR (with an optional :port)");
  }
  rule.domain = std::move(name);
  return rule;
}

Result<std::vector<EgressRule>> ParseEgressRules(std::string_view text, std::string_view what) {
  std::vector<EgressRule> out;
  for (size_t pos = 0; pos < text.size();) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    std::string_view part = text.substr(pos, comma - pos);
    pos = comma + 1;
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    if (part.empty()) continue;
    auto rule = ParseEgressRule(part);
    if (!rule.ok()) return Status::Error(std::string(what) + ": " + rule.status().message());
    out.push_back(std::move(rule).value());
  }
  return out;
}

bool EgressPolicy::AllowsName(std::string_view name, uint16_t port) const {
  boost::system::error_code ec;
  const address literal = boost::asio::ip::make_address(name, ec);
  if (!ec) {  // named by its address: a CIDR rule must name it
    auto has = [&](const EgressRule& r) { return r.MatchesAddress(literal, port); };
    return std::any_of(allow.begin(), allow.end(), has) && AllowsAddress(literal, port);
  }
  auto matches = [&](const EgressRule& r) { return r.MatchesName(name, port); };
  return std::any_of(allow.begin(), allow.end(), matches) &&
         std::none_of(deny.begin(), deny.end(), matches);
}

bool EgressPolicy::AllowsAddress(const address& a, uint16_t port) const {
  auto matches = [&](const EgressRule& r) { return r.MatchesAddress(a, port); };
  if (std::any_of(deny.begin(), deny.end(), matches)) return false;
  return std::any_of(allow.begin(), allow.end(), matches) || (IsPublicAddress(a) && !none());
}

std::string EgressPolicy::ToString() const {
  std::string out;
  for (const auto& r : allow) {
    if (!out.empty()) out += ',';
    out += r.ToString();
  }
  if (out.empty()) out = "none";
  for (const auto& r : deny) {
    out += " -";
    out += r.ToString();
  }
  return out;
}

Result<EgressPolicy> Narrow(const EgressPolicy& requested, const EgressPolicy& max) {
  EgressPolicy out;
  for (const auto& rule : requested.allow) {
    auto inside = [&](const EgressRule& outer) { return rule.Inside(outer); };
    if (std::none_of(max.allow.begin(), max.allow.end(), inside)) {
      return Status::Error(
          "'" + rule.ToString() +
          "' is not within what this server allows (EGRESS_ALLOW_MAX: " + max.ToString() + ")");
    }
    out.allow.push_back(rule);
  }
  out.deny = max.deny;
  out.deny.insert(out.deny.end(), requested.deny.begin(), requested.deny.end());
  return out;
}

bool IsPublicAddress(const address& raw) {
  const address a = Unmapped(raw);
  if (a.is_unspecified() || a.is_loopback() || a.is_multicast()) return false;
  static const std::vector<EgressRule> kNotPublic = [] {
    std::vector<EgressRule> out;
    for (const char* text :
         {"0.0.0.0/8",       "10.0.0.0/8",     "100.64.0.0/10", "127.0.0.0/8",    "169.254.0.0/16",
          "172.16.0.0/12",   "192.0.0.0/24",   "192.0.2.0/24",  "192.168.0.0/16", "198.18.0.0/15",
          "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4",   "::/128",         "::1/128",
          "64:ff9b::/96",    "100::/64",       "2001:db8::/32", "fc00::/7",       "fe80::/10",
          "fec0::/10",       "ff00::/8"}) {
      out.push_back(ParseEgressRule(text).value());
    }
    return out;
  }();
  return std::none_of(kNotPublic.begin(), kNotPublic.end(),
                      [&](const EgressRule& r) { return InNetwork(a, r.network, r.prefix); });
}

}  // namespace ci::daemon
