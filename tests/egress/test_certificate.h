// A self-signed certificate made in the test (nothing is checked in): an upstream TLS server's
// identity, trusted by the proxy through its upstream CA option, or not trusted at all.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <string>
#include <vector>

namespace ci::daemon {

struct TestCertificate {
  std::string cert_pem;
  std::string key_pem;
};

inline std::string TestPem(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

// Valid for a day, for the DNS names given (the first is also its common name).
inline TestCertificate MakeTestCertificate(const std::vector<std::string>& names) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 7);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_NAME* subject = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(names.front().c_str()), -1, -1,
                             0);
  X509_set_issuer_name(x, subject);
  X509_set_pubkey(x, key);
  std::string san;
  for (const std::string& n : names) san += (san.empty() ? "DNS:" : ",DNS:") + n;
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  for (auto [nid, value] : {std::pair<int, std::string>{NID_subject_alt_name, san},
                            {NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }
  X509_sign(x, key, EVP_sha256());
  TestCertificate out;
  BIO* cert = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(cert, x);
  out.cert_pem = TestPem(cert);
  BIO* pkey = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(pkey, key, nullptr, nullptr, 0, nullptr, nullptr);
  out.key_pem = TestPem(pkey);
  X509_free(x);
  EVP_PKEY_free(key);
  return out;
}

}  // namespace ci::daemon
