#include "test_pki.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>

namespace ci::llm::test_support {
namespace {

using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using Cert = std::unique_ptr<X509, decltype(&X509_free)>;

void Check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test PKI: ") + what);
}

Key NewKey() {
  Key key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"), EVP_PKEY_free);
  Check(key != nullptr, "EC key generation");
  return key;
}

template <typename Write>
std::string Pem(Write write) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  Check(write(bio.get()) == 1, "PEM output");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

std::string KeyPem(EVP_PKEY* key) {
  return Pem([&](BIO* b) {
    return PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
  });
}

std::string CertPem(X509* cert) {
  return Pem([&](BIO* b) { return PEM_write_bio_X509(b, cert); });
}

void AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  Check(ext != nullptr, "an X.509 extension");
  Check(X509_add_ext(cert, ext, -1) == 1, "adding an X.509 extension");
  X509_EXTENSION_free(ext);
}

// An unsigned certificate for `key` named `common_name`, issued by `issuer` (null: by itself).
Cert NewCert(EVP_PKEY* key, const std::string& common_name, X509* issuer) {
  static long serial = 1;
  Cert cert(X509_new(), X509_free);
  Check(cert != nullptr, "X509_new");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial++);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509_set_issuer_name(cert.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name);
  return cert;
}

void Sign(X509* cert, EVP_PKEY* key) { Check(X509_sign(cert, key, EVP_sha256()) > 0, "signing"); }

Key ReadKey(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), -1), BIO_free);
  Key key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
  Check(key != nullptr, "reading the CA key");
  return key;
}

Cert ReadCert(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), -1), BIO_free);
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), X509_free);
  Check(cert != nullptr, "reading the CA certificate");
  return cert;
}

}  // namespace

TestCa MakeCa(const std::string& common_name) {
  Key key = NewKey();
  Cert cert = NewCert(key.get(), common_name, nullptr);
  AddExtension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE");
  AddExtension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
  AddExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash");
  Sign(cert.get(), key.get());
  return {CertPem(cert.get()), KeyPem(key.get())};
}

ServerCert MakeServerCert(const TestCa& ca, const std::string& subject_alt_names) {
  Key ca_key = ReadKey(ca.key_pem);
  Cert ca_cert = ReadCert(ca.cert_pem);
  Key key = NewKey();
  Cert cert = NewCert(key.get(), "test server", ca_cert.get());
  AddExtension(cert.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE");
  AddExtension(cert.get(), ca_cert.get(), NID_key_usage, "critical,digitalSignature");
  AddExtension(cert.get(), ca_cert.get(), NID_ext_key_usage, "serverAuth");
  AddExtension(cert.get(), ca_cert.get(), NID_subject_alt_name, subject_alt_names);
  AddExtension(cert.get(), ca_cert.get(), NID_authority_key_identifier, "keyid:always");
  Sign(cert.get(), ca_key.get());
  return {CertPem(cert.get()), KeyPem(key.get())};
}

namespace {

std::string WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path.string();
}

// The files live in a directory removed when the process ends.
struct PkiFiles {
  PkiFiles() {
    std::string pattern = (std::filesystem::temp_directory_path() / "llm-tests-XXXXXX").string();
    Check(::mkdtemp(pattern.data()) != nullptr, "mkdtemp");
    dir = pattern;
    pki.trusted = MakeCa("llm tests trusted CA");
    pki.untrusted = MakeCa("llm tests untrusted CA");
    pki.trusted_ca_file = WriteFile(dir / "trusted-ca.pem", pki.trusted.cert_pem);
    pki.untrusted_ca_file = WriteFile(dir / "untrusted-ca.pem", pki.untrusted.cert_pem);
    pki.localhost = MakeServerCert(pki.trusted, "DNS:localhost,IP:127.0.0.1");
    pki.other_name = MakeServerCert(pki.trusted, "DNS:other.example");
    pki.from_untrusted = MakeServerCert(pki.untrusted, "DNS:localhost,IP:127.0.0.1");
  }
  ~PkiFiles() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  std::filesystem::path dir;
  TestPki pki;
};

}  // namespace

const TestPki& Pki() {
  static const PkiFiles files;
  return files.pki;
}

ScopedEnv::ScopedEnv(const char* name, const std::string& value) : name_(name) {
  if (const char* old = std::getenv(name)) {
    had_ = true;
    old_ = old;
  }
  ::setenv(name, value.c_str(), 1);
}

ScopedEnv::~ScopedEnv() {
  if (had_) {
    ::setenv(name_.c_str(), old_.c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
}

}  // namespace ci::llm::test_support
