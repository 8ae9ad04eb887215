// A sandbox's way out (docs/egress.md): an HTTP proxy of the daemon's that the sandbox reaches at
// a loopback address, for `http://` requests (absolute form) and `CONNECT` tunnels for TLS. Each
// destination is checked against the sandbox's policy by name, resolved here (never by the
// sandbox), and every address it resolves to is checked too (no private, loopback, link-local or
// metadata address unless a CIDR rule names it), so DNS cannot route around the policy. In a
// tunnel the TLS ClientHello's server name must be the CONNECT's host. What was reached and
// what was refused is kept for the execution's report.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/inside_listener.h"
#include "daemon/egress/egress_pacer.h"
#include "daemon/egress/egress_policy.h"

namespace ci::daemon {

class EgressSecrets;       // egress_secrets.h
class EgressInterception;  // egress_interception.h

struct EgressDestination {
  std::string host;  // as the client named it
  uint16_t port = 0;
  uint32_t connections = 0;
  uint64_t bytes_out = 0;  // from the sandbox
  uint64_t bytes_in = 0;   // to the sandbox
};

struct EgressRefusal {
  std::string host;
  uint16_t port = 0;
  std::string reason;
};

struct EgressReport {
  std::vector<EgressDestination> reached;
  std::vector<EgressRefusal> refused;  // the first kMaxRefusals
  uint64_t refused_count = 0;
};

// Every proxy's connections since the daemon started (/metrics).
// Atomic: the proxies' thread counts, /metrics reads from the daemon's.
struct EgressCounters {
  std::atomic<uint64_t> allowed{0};  // reached their destination
  std::atomic<uint64_t> refused{0};
};

struct EgressProxyOptions {
  EgressPolicy policy;
  // Names resolved without DNS (EGRESS_HOSTS), e.g. a local package index under its own name.
  std::map<std::string, std::vector<boost::asio::ip::address>> hosts;
  size_t max_connections = 64;    // open at once; more are refused (EGRESS_MAX_CONNECTIONS)
  uint64_t bytes_per_second = 0;  // both ways, all connections (EGRESS_BANDWIDTH_KBPS); 0: any
  std::chrono::milliseconds connect_timeout{10000};
  std::shared_ptr<EgressCounters> counters;  // the daemon's; null: not counted
  // Headers added on the way out per destination (EGRESS_SECRETS_FILE); null: none. One holder
  // per daemon, shared by every sandbox's proxy.
  std::shared_ptr<EgressSecrets> secrets;
  // The daemon's CA and the domains whose tunnels are decrypted to add secrets
  // (EGRESS_TLS_INTERCEPT); null: every tunnel stays opaque.
  std::shared_ptr<EgressInterception> interception;
};

class EgressProxy : public std::enable_shared_from_this<EgressProxy> {
 public:
  static constexpr size_t kMaxRefusals = 100;
  static constexpr size_t kMaxHead = 16 * 1024;

  EgressProxy(boost::asio::any_io_executor ex, EgressProxyOptions options);

  // Accepts and serves connections until the listener or the proxy is closed. Runs on the
  // proxy's executor; the listener's Accept runs on its own.
  boost::asio::awaitable<void> Accept(std::shared_ptr<InsideListener> listener);
  // Serves one connection from the sandbox: one request, or one tunnel.
  boost::asio::awaitable<void> Serve(InsideListener::Stream client);

  // The calls below are made on executor() (SandboxEgress hops there).
  boost::asio::any_io_executor executor() const { return ex_; }
  EgressReport report() const;
  // For connections from now on (E2B's updateNetwork); open ones keep what they were allowed.
  void SetPolicy(EgressPolicy policy) { options_.policy = std::move(policy); }
  // Ends every connection (the program is done): tunnels to servers that never close included.
  void CloseAll();

 private:
  struct Target;
  struct Request;  // a plain-HTTP request's head, checked, with its body's length
  boost::asio::awaitable<void> Tunnel(InsideListener::Stream& client, Target target,
                                      std::string buffered);
  boost::asio::awaitable<void> Forward(InsideListener::Stream& client, Target target,
                                       Request request, std::string buffered);
  // A tunnel to a host of EGRESS_TLS_INTERCEPT, its ClientHello checked and in `buffered`: TLS
  // ended here with the daemon CA's certificate, one request served as Forward serves it.
  boost::asio::awaitable<void> Intercept(InsideListener::Stream& client, Target target,
                                         std::vector<boost::asio::ip::address> addresses,
                                         std::string buffered);
  // The checked addresses of the target, or a refusal's reason.
  boost::asio::awaitable<std::vector<boost::asio::ip::address>> Resolve(const Target& target,
                                                                        std::string* why);
  boost::asio::awaitable<bool> Connect(InsideListener::Stream& upstream,
                                       const std::vector<boost::asio::ip::address>& addresses,
                                       uint16_t port);
  boost::asio::awaitable<void> Splice(InsideListener::Stream& client,
                                      InsideListener::Stream& upstream, EgressDestination& counts);
  boost::asio::awaitable<void> Refuse(InsideListener::Stream& client, const Target& target,
                                      int status, std::string reason);
  void NoteRefusal(const Target& target, std::string reason);
  EgressDestination& Reached(const Target& target);

  boost::asio::any_io_executor ex_;
  EgressProxyOptions options_;
  std::map<std::pair<std::string, uint16_t>, EgressDestination> reached_;  // stable references
  std::vector<EgressRefusal> refused_;
  uint64_t refused_count_ = 0;
  size_t open_ = 0;
  std::set<InsideListener::Stream*> sockets_;  // open ones, client and server sides
  bool closed_ = false;
  std::unique_ptr<EgressPacer> pacer_;  // null: no bandwidth limit
  // Destinations whose secrets were left out of an opaque tunnel, logged once each.
  std::set<std::pair<std::string, uint16_t>> secrets_not_added_;
};

}  // namespace ci::daemon
