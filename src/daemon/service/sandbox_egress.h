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
#include "daemon/egress/egress_proxy.h"
#include "daemon/service/requests.h"

namespace ci::daemon {

// Where the proxy listens inside the sandbox.
inline constexpr uint16_t kEgressPort = 3128;

// HTTP_PROXY and friends (curl, Python, pip, npm, Go), for a sandbox with a policy.
const std::vector<std::string>& EgressEnvironment();

// The policy of a request's `network` (its rules, each within `max`), or `fallback` without one.
Result<EgressPolicy> EgressFor(const std::optional<NetworkRequest>& network,
                               const EgressPolicy& fallback, const EgressPolicy& max);

struct SandboxEgress {
  std::shared_ptr<EgressProxy> proxy;
  std::shared_ptr<InsideListener> listener;
  // No new connections, and those open end: the program is done.
  void Stop();
};

boost::asio::awaitable<Result<SandboxEgress>> StartEgress(
    Sandbox& sandbox, const EgressPolicy& policy,
    const std::map<std::string, std::vector<boost::asio::ip::address>>& hosts);

}  // namespace ci::daemon
