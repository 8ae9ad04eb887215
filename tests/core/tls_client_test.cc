// The HTTPS clients' one TLS policy (core/tls_client.h): what it refuses to build on, with the
// part that failed named. Handshakes through it are tested by each client's suite (the model's
// TLS server, the Kubernetes and Docker TLS endpoints).
#include "core/tls_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/ssl.h>

namespace ci {
namespace {

using ::testing::HasSubstr;

TEST(TlsClient, VerifiesByDefaultAgainstTheSystemStoreAndRequiresTls12) {
  Result<std::shared_ptr<boost::asio::ssl::context>> ctx = MakeTlsClientContext({});
  ASSERT_TRUE(ctx.ok()) << ctx.status().message();
  SSL_CTX* native = (*ctx)->native_handle();
  EXPECT_EQ(::SSL_CTX_get_verify_mode(native), SSL_VERIFY_PEER);
  EXPECT_EQ(::SSL_CTX_get_min_proto_version(native), TLS1_2_VERSION);
}

TEST(TlsClient, VerifyingNothingIsOnlyWhenAsked) {
  TlsClientSettings s;
  s.verify = false;
  Result<std::shared_ptr<boost::asio::ssl::context>> ctx = MakeTlsClientContext(s);
  ASSERT_TRUE(ctx.ok()) << ctx.status().message();
  EXPECT_EQ(::SSL_CTX_get_verify_mode((*ctx)->native_handle()), SSL_VERIFY_NONE);
}

TEST(TlsClient, WhatCannotBeLoadedIsNamed) {
  TlsClientSettings bad_ca, missing_ca, missing_cert, bad_cert;
  bad_ca.ca_pem = "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n";
  missing_ca.ca_file = "/nonexistent/ca.pem";
  missing_cert.cert_file = "/nonexistent/cert.pem";
  missing_cert.key_file = "/nonexistent/key.pem";
  bad_cert.cert_pem = bad_cert.key_pem = "garbage";
  const std::pair<TlsClientSettings, std::string> cases[] = {
      {bad_ca, "the CA certificates: "},
      {missing_ca, "the CA certificates /nonexistent/ca.pem: "},
      {missing_cert, "the client certificate /nonexistent/cert.pem: "},
      {bad_cert, "the client certificate: "},
  };
  for (const auto& [settings, says] : cases) {
    auto ctx = MakeTlsClientContext(settings);
    ASSERT_FALSE(ctx.ok()) << says;
    EXPECT_THAT(ctx.status().message(), HasSubstr(says));
  }
}

}  // namespace
}  // namespace ci
