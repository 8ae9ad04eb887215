// An execution's way out (docs/egress.md): the proxy of its sandbox, accepting on a socket that
// the sandbox's backend made inside the sandbox's network (Sandbox::ListenInside), and the
// environment that points the program's tools at it.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/address.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/executor.h"
#include "core/status.h"
#include "daemon/config/config.h"
#include "daemon/egress/egress_proxy.h"
#include "daemon/egress/egress_thread.h"
#include "daemon/service/requests.h"

namespace ci::daemon {

// Where the proxy listens inside the sandbox.
inline constexpr uint16_t kEgressPort = 3128;

// HTTP_PROXY and friends (curl, Python, pip, npm, Go), for a sandbox with a policy.
const std::vector<std::string>& EgressEnvironment();

// What every sandbox's proxy shares, made once per daemon from its configuration: the names
// pinned by EGRESS_HOSTS, the operator's secrets (EGRESS_SECRETS_FILE) and the interception CA
// (EGRESS_TLS_INTERCEPT) with the trust bundle sandboxes get for it.
struct EgressShared {
  std::map<std::string, std::vector<boost::asio::ip::address>> hosts;
  std::shared_ptr<EgressSecrets> secrets;
  std::shared_ptr<EgressInterception> interception;
  // The PEM of the system's CAs and the daemon's, in a file of the daemon's (staged into each
  // sandbox with a policy); empty without interception.
  std::string trust_file;
  std::string error;  // why the secrets or the CA are missing: sandboxes get no network
  std::shared_ptr<EgressCounters> counters = std::make_shared<EgressCounters>();
  // Where every proxy runs (null without EGRESS_ALLOW_MAX: no sandbox gets egress).
  std::shared_ptr<EgressThread> thread;
  size_t max_connections = 64;    // each sandbox's
  uint64_t bytes_per_second = 0;  // each sandbox's; 0: unlimited
};
// `dir`: where the trust file is written (the file store's incoming directory).
EgressShared MakeEgressShared(const Config& config, const std::string& dir);

// Where a sandbox finds the trust file (staged into its workspace as an input, so never returned
// as an output unless changed), and the variables that point its tools at it.
inline constexpr std::string_view kEgressTrustFile = ".ci-egress-ca.pem";
std::vector<std::string> EgressTrustEnvironment(const std::string& cwd);
// What a sandbox with a policy gets: its environment (EgressEnvironment and, with interception,
// the trust variables) into `spec`, the trust file into `files` (either may be null).
void AddEgressTo(const EgressShared& shared, SandboxSpec* spec, std::vector<StagedFile>* files);

// A client's egress: its policy when a request names none, and the bound of those that do.
struct EgressBounds {
  EgressPolicy fallback;  // EGRESS_ALLOW, or the API key's egress=
  EgressPolicy max;       // EGRESS_ALLOW_MAX, or the API key's egress=
};
// The daemon's bounds, or a key's own `rules` (each within EGRESS_ALLOW_MAX, else an error naming
// the rule: the operator's file may not widen the daemon's bound).
Result<EgressBounds> BoundsFor(const Config& config,
                               const std::optional<std::vector<EgressRule>>& rules);

// The policy of a request's `network` (its rules, each within `max`), or `fallback` without one.
Result<EgressPolicy> EgressFor(const std::optional<NetworkRequest>& network,
                               const EgressPolicy& fallback, const EgressPolicy& max);

// A sandbox's proxy (on the egress thread) and the listener it accepts from; the daemon's
// thread asks them things through these calls, which hop to where each lives.
struct SandboxEgress {
  std::shared_ptr<EgressProxy> proxy;
  std::shared_ptr<InsideListener> listener;
  // No new connections, and those open end: the program is done.
  boost::asio::awaitable<void> Stop() const;
  // What it reached and was refused so far.
  boost::asio::awaitable<EgressReport> Report() const;
  // The policy of its connections from now on (E2B's updateNetwork).
  boost::asio::awaitable<void> SetPolicy(EgressPolicy policy) const;
};

boost::asio::awaitable<Result<SandboxEgress>> StartEgress(Sandbox& sandbox,
                                                          const EgressPolicy& policy,
                                                          const EgressShared& shared);

}  // namespace ci::daemon
