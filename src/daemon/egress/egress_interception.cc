#include "daemon/egress/egress_interception.h"

#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstdio>

namespace ci::daemon {

Result<std::shared_ptr<EgressInterception>> EgressInterception::Create(
    std::vector<EgressRule> domains, const std::string& upstream_ca_file) {
  namespace ssl = boost::asio::ssl;
  for (const EgressRule& r : domains) {
    if (r.kind == EgressRule::Kind::kCidr) {
      return Status::Error("TLS interception is for domains and *.wildcards, not " + r.ToString());
    }
  }
  if (!upstream_ca_file.empty()) {
    if (Status s = CheckCaFile(upstream_ca_file); !s.ok()) return s;
  }
  auto out = std::make_shared<EgressInterception>();
  out->domains_ = std::move(domains);
  auto ca = EgressCa::Create();
  if (!ca.ok()) return ca.status();
  out->ca_ = std::move(ca).value();
  out->upstream_ = std::make_shared<ssl::context>(ssl::context::tls_client);
  if (SSL_CTX_set_min_proto_version(out->upstream_->native_handle(), TLS1_2_VERSION) != 1) {
    return Status::Error("TLS interception: cannot require TLS 1.2");
  }
  boost::system::error_code ec;
  out->upstream_->set_default_verify_paths(ec);
  if (ec) return Status::Error("TLS interception: the system's trust store: " + ec.message());
  if (!upstream_ca_file.empty()) {
    out->upstream_->load_verify_file(upstream_ca_file, ec);
    if (ec) return Status::Error("cannot load " + upstream_ca_file + ": " + ec.message());
  }
  out->upstream_->set_verify_mode(ssl::verify_peer);
  return out;
}

bool EgressInterception::Intercepts(std::string_view host, uint16_t port) const {
  for (const EgressRule& r : domains_) {
    if (r.MatchesName(host, port)) return true;
  }
  return false;
}

Result<std::string> EgressInterception::SandboxTrustBundle() const {
  return ci::daemon::SandboxTrustBundle(ca_->pem());
}

Status CheckCaFile(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return Status::Error("cannot read " + path);
  X509* x = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (x == nullptr) return Status::Error(path + " holds no PEM certificate");
  X509_free(x);
  return Status();
}

}  // namespace ci::daemon
