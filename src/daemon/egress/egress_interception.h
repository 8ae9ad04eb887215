// TLS interception for named domains only (EGRESS_TLS_INTERCEPT, docs/egress.md "Secrets"): a
// tunnel to one of them is decrypted with a certificate of the daemon's CA, so the proxy can add
// the destination's secrets, and re-encrypted to the real server, whose certificate and name are
// verified against the system's trust store plus the operator's CAs (EGRESS_UPSTREAM_CA_FILE).
// Every other tunnel stays opaque.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "daemon/egress/egress_ca.h"
#include "daemon/egress/egress_policy.h"

namespace ci::daemon {

class EgressInterception {
 public:
  // The CA is made here; `domains` are domain and wildcard rules (a CIDR is an error);
  // `upstream_ca_file`, when not empty, is a PEM file of CAs trusted besides the system's.
  static Result<std::shared_ptr<EgressInterception>> Create(std::vector<EgressRule> domains,
                                                            const std::string& upstream_ca_file);

  bool Intercepts(std::string_view host, uint16_t port) const;
  EgressCa& ca() { return *ca_; }
  // The client context for upstream servers: TLS 1.2 at least, certificates verified.
  boost::asio::ssl::context& upstream() { return *upstream_; }
  // The PEM bundle sandboxes should trust: the system's bundle, then the daemon CA's certificate.
  Result<std::string> SandboxTrustBundle() const;

 private:
  std::vector<EgressRule> domains_;
  std::shared_ptr<EgressCa> ca_;
  std::shared_ptr<boost::asio::ssl::context> upstream_;
};

// Whether `path` is a PEM file with at least one certificate (EGRESS_UPSTREAM_CA_FILE's check).
Status CheckCaFile(const std::string& path);

}  // namespace ci::daemon
