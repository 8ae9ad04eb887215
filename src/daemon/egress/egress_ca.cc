#include "daemon/egress/egress_ca.h"

#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <vector>

namespace ci::daemon {
namespace {

struct CaX509Free {
  void operator()(X509* x) const { X509_free(x); }
};
using CaX509Ptr = std::unique_ptr<X509, CaX509Free>;

// A random positive 127-bit serial number, as certificates should have (RFC 5280 4.1.2.2).
bool CaSetSerial(X509* x) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return false;
  bytes[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(bytes, sizeof bytes, nullptr);
  if (bn == nullptr) return false;
  const bool ok = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != nullptr;
  BN_free(bn);
  return ok;
}

bool CaAddExtension(X509* x, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, x, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(x, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for `key` named `cn`, signed by `issuer_key` (self-signed: issuer null), valid
// from an hour ago (clocks differ) for `validity`; `extensions` are (nid, value) pairs.
CaX509Ptr CaMakeCertificate(EVP_PKEY* key, const std::string& cn, X509* issuer,
                            EVP_PKEY* issuer_key, std::chrono::seconds validity,
                            const std::vector<std::pair<int, std::string>>& extensions) {
  CaX509Ptr x(X509_new());
  if (!x || X509_set_version(x.get(), 2) != 1 || !CaSetSerial(x.get())) return nullptr;
  X509_gmtime_adj(X509_getm_notBefore(x.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), static_cast<long>(validity.count()));
  X509_NAME* name = X509_get_subject_name(x.get());
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1) {
    return nullptr;
  }
  X509* signer = issuer != nullptr ? issuer : x.get();
  if (X509_set_issuer_name(x.get(), X509_get_subject_name(signer)) != 1 ||
      X509_set_pubkey(x.get(), key) != 1) {
    return nullptr;
  }
  for (const auto& [nid, value] : extensions) {
    if (!CaAddExtension(x.get(), signer, nid, value.c_str())) return nullptr;
  }
  if (X509_sign(x.get(), issuer_key, EVP_sha256()) == 0) return nullptr;
  return x;
}

std::string CaPem(X509* x) {
  BIO* bio = BIO_new(BIO_s_mem());
  std::string out;
  if (bio != nullptr && PEM_write_bio_X509(bio, x) == 1) {
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    out.assign(data, static_cast<size_t>(n));
  }
  BIO_free(bio);
  return out;
}

}  // namespace

Result<std::shared_ptr<EgressCa>> EgressCa::Create() {
  std::shared_ptr<EgressCa> ca(new EgressCa());
  ca->key_ = EVP_EC_gen("P-256");
  ca->leaf_key_ = EVP_EC_gen("P-256");
  if (ca->key_ == nullptr || ca->leaf_key_ == nullptr) {
    return Status::Error("egress CA: cannot make a P-256 key");
  }
  // Ten years: the key lives only as long as the daemon, which may run long.
  CaX509Ptr cert = CaMakeCertificate(ca->key_, "code-interpreter egress CA", nullptr, ca->key_,
                                     std::chrono::hours(24 * 3650),
                                     {{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                                      {NID_key_usage, "critical,keyCertSign,cRLSign"},
                                      {NID_subject_key_identifier, "hash"}});
  if (!cert) return Status::Error("egress CA: cannot make its certificate");
  ca->cert_ = cert.release();
  ca->pem_ = CaPem(ca->cert_);
  if (ca->pem_.empty()) return Status::Error("egress CA: cannot write its certificate as PEM");
  return ca;
}

EgressCa::~EgressCa() {
  X509_free(cert_);
  EVP_PKEY_free(key_);
  EVP_PKEY_free(leaf_key_);
}

Result<std::shared_ptr<boost::asio::ssl::context>> EgressCa::ServerContext(
    const std::string& host) {
  namespace ssl = boost::asio::ssl;
  // A name only: the SAN is written in OpenSSL's configuration syntax, where ',' adds another.
  const bool name = !host.empty() && std::all_of(host.begin(), host.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
  });
  if (!name) return Status::Error("egress CA: not a host name: " + host);
  const auto now = std::chrono::system_clock::now();
  std::lock_guard lock(mu_);
  if (auto it = leaves_.find(host); it != leaves_.end() && it->second.renew > now) {
    return it->second.context;
  }
  if (leaves_.size() >= 4096) leaves_.clear();  // wildcards may name many hosts
  CaX509Ptr leaf = CaMakeCertificate(leaf_key_, host, cert_, key_, kLeafValidity,
                                     {{NID_basic_constraints, "critical,CA:FALSE"},
                                      {NID_key_usage, "critical,digitalSignature"},
                                      {NID_ext_key_usage, "serverAuth"},
                                      {NID_subject_alt_name, "DNS:" + host},
                                      {NID_authority_key_identifier, "keyid:always"}});
  if (!leaf) return Status::Error("egress CA: cannot make a certificate for " + host);
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  if (SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION) != 1 ||
      SSL_CTX_use_certificate(native, leaf.get()) != 1 ||
      SSL_CTX_use_PrivateKey(native, leaf_key_) != 1) {
    return Status::Error("egress CA: cannot use the certificate for " + host);
  }
  // Renewed a day before it ends, so no connection meets an expired one.
  leaves_[host] = {ctx, now + kLeafValidity - std::chrono::hours(24)};
  return ctx;
}

Result<std::string> SandboxTrustBundle(const std::string& ca_pem,
                                       const std::string& system_bundle) {
  std::ifstream in(system_bundle, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) {
    return Status::Error("cannot read the system's CA bundle " + system_bundle);
  }
  std::string out = text.str();
  if (!out.ends_with('\n')) out += '\n';
  return out + ca_pem;
}

}  // namespace ci::daemon
