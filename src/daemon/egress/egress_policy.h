// Egress policies (docs/egress.md): which destinations a sandbox's proxy may connect to. A rule
// is a domain ("pypi.org"), a wildcard ("*.pythonhosted.org": its subdomains, not itself) or a
// CIDR ("10.1.0.0/16", "2001:db8::/32"), each with an optional port (":443", "[2001:db8::]/32:443";
// none: any). A name is allowed by a domain or wildcard rule, an address by a CIDR rule; deny
// rules win over allow rules. The operator's EGRESS_ALLOW_MAX bounds every policy: a request's
// rules must each lie inside one of it (Narrow).
#pragma once

#include <boost/asio/ip/address.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ci::daemon {

struct EgressRule {
  enum class Kind { kDomain, kWildcard, kCidr };
  Kind kind = Kind::kDomain;
  std::string domain;  // lower case, without "*." and a trailing dot
  boost::asio::ip::address network;
  unsigned prefix = 0;
  std::optional<uint16_t> port;

  bool MatchesName(std::string_view name, uint16_t port) const;
  bool MatchesAddress(const boost::asio::ip::address& address, uint16_t port) const;
  // Whether every destination this rule matches is matched by `outer` too.
  bool Inside(const EgressRule& outer) const;
  std::string ToString() const;
};

// One rule from its text, or why not.
Result<EgressRule> ParseEgressRule(std::string_view text);

// A comma-separated list of rules (EGRESS_ALLOW, EGRESS_ALLOW_MAX, ...); `what` names it in errors.
Result<std::vector<EgressRule>> ParseEgressRules(std::string_view text, std::string_view what);

struct EgressPolicy {
  std::vector<EgressRule> allow;
  std::vector<EgressRule> deny;

  // No allow rule: no network at all (today's sandboxes).
  bool none() const { return allow.empty(); }
  // A destination named by the client: a name by domain rules, an address literal by a CIDR
  // rule (the public internet is reached by name only).
  bool AllowsName(std::string_view name, uint16_t port) const;
  // An address a name resolved to, or an address literal: not denied, and either public or
  // inside an allowed CIDR (loopback, private and link-local ones, the metadata address among
  // them, only when a CIDR rule names them).
  bool AllowsAddress(const boost::asio::ip::address& address, uint16_t port) const;
  std::string ToString() const;
};

// `requested` narrowed by the operator's bound: each of its allow rules must lie inside an allow
// rule of `max` (else an error naming it); the result denies what either denies.
Result<EgressPolicy> Narrow(const EgressPolicy& requested, const EgressPolicy& max);

// Whether an address is on the public internet: not loopback, unspecified, private (RFC 1918,
// fc00::/7), shared (100.64/10), link-local (169.254/16 with the metadata address, fe80::/10),
// multicast, reserved or broadcast; IPv4-mapped IPv6 addresses as their IPv4 address.
bool IsPublicAddress(const boost::asio::ip::address& address);

}  // namespace ci::daemon
