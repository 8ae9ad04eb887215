// The daemon's certificate authority for TLS interception (docs/egress.md "Secrets"): made at
// startup, in memory only (an ECDSA P-256 key that is never written anywhere), it signs a
// short-lived certificate for each intercepted host, which sandboxes trust through its PEM.
#pragma once

#include <openssl/types.h>

#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/status.h"

namespace ci::daemon {

class EgressCa {
 public:
  static constexpr std::chrono::hours kLeafValidity{24 * 7};

  static Result<std::shared_ptr<EgressCa>> Create();
  ~EgressCa();
  EgressCa(const EgressCa&) = delete;
  EgressCa& operator=(const EgressCa&) = delete;

  // The CA's certificate, PEM: what sandboxes must trust for intercepted hosts.
  const std::string& pem() const { return pem_; }
  // A TLS server context presenting a certificate for `host` (its only SAN), signed by this CA;
  // made on first use and kept until it nears its end.
  Result<std::shared_ptr<boost::asio::ssl::context>> ServerContext(const std::string& host);

 private:
  struct Leaf {
    std::shared_ptr<boost::asio::ssl::context> context;
    std::chrono::system_clock::time_point renew;
  };
  EgressCa() = default;

  EVP_PKEY* key_ = nullptr;       // the CA's
  EVP_PKEY* leaf_key_ = nullptr;  // one for every leaf: the CA's signature binds it to each host
  X509* cert_ = nullptr;
  std::string pem_;
  std::mutex mu_;
  std::map<std::string, Leaf> leaves_;
};

// The PEM bundle a sandbox should trust: the system's (`system_bundle`) followed by `ca_pem`.
Result<std::string> SandboxTrustBundle(
    const std::string& ca_pem,
    const std::string& system_bundle = "/etc/ssl/certs/ca-certificates.crt");

}  // namespace ci::daemon
