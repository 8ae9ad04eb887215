// A throw-away certificate authority for the TLS tests: a CA and server certificates it signs,
// made with OpenSSL's C API in memory (P-256 keys, valid from an hour ago for a day).
#pragma once

#include <string>

namespace ci::llm::test_support {

struct TestCa {
  std::string cert_pem;
  std::string key_pem;
};

struct ServerCert {
  std::string cert_pem;
  std::string key_pem;
};

TestCa MakeCa(const std::string& common_name);

// A server certificate signed by `ca` for `subject_alt_names` ("DNS:localhost,IP:127.0.0.1").
ServerCert MakeServerCert(const TestCa& ca, const std::string& subject_alt_names);

// What the TLS tests use, made once per process: a CA whose certificate file the tests name in
// SSL_CERT_FILE, another CA nobody trusts, and server certificates from both.
struct TestPki {
  TestCa trusted;
  TestCa untrusted;
  std::string trusted_ca_file;    // the trusted CA's certificate, for SSL_CERT_FILE
  std::string untrusted_ca_file;  // the other CA's
  ServerCert localhost;           // trusted, DNS:localhost and IP:127.0.0.1
  ServerCert other_name;          // trusted, DNS:other.example only
  ServerCert from_untrusted;      // the other CA's, DNS:localhost and IP:127.0.0.1
};
const TestPki& Pki();

// Sets an environment variable for a scope, restoring what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  bool had_ = false;
  std::string old_;
};

}  // namespace ci::llm::test_support
