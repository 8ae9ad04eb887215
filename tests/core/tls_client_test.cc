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
  TlsClientSettings bad_ca;
  bad_ca.ca_pem = "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n";
  auto ctx = MakeTlsClientContext(bad_ca);
  ASSERT_FALSE(ctx.ok());
  EXPECT_THAT(ctx.status().message(), HasSubstr("the CA certificates: "));

  TlsClientSettings missing_ca;
  missing_ca.ca_file = "/nonexistent/ca.pem";
  ctx = MakeTlsClientContext(missing_ca);
  ASSERT_FALSE(ctx.ok());
  EXPECT_THAT(ctx.status().message(), HasSubstr("the CA certificates /nonexistent/ca.pem: "));

  TlsClientSettings missing_cert;
  missing_cert.cert_file = "/nonexistent/cert.pem";
  missing_cert.key_file = "/nonexistent/key.pem";
  ctx = MakeTlsClientContext(missing_cert);
  ASSERT_FALSE(ctx.ok());
  EXPECT_THAT(ctx.status().message(), HasSubstr("the client certificate /nonexistent/cert.pem: "));

  TlsClientSettings bad_cert;
  bad_cert.cert_pem = "garbage";
  bad_cert.key_pem = "garbage";
  ctx = MakeTlsClientContext(bad_cert);
  ASSERT_FALSE(ctx.ok());
  EXPECT_THAT(ctx.status().message(), HasSubstr("the client certificate: "));
}

}  // namespace
}  // namespace ci
