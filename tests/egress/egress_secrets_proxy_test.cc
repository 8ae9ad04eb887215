// Secrets added by the proxy, over real sockets and real OpenSSL on loopback: plain-HTTP requests
// and intercepted TLS tunnels reach servers of the test's own that echo the request's head; the
// server sees the secret, the sandbox's side only its mask. A tunnel to a host that is not
// intercepted stays opaque, and an upstream whose certificate does not verify is refused.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include "core/tls_peer.h"
#include "daemon/egress/egress_interception.h"
#include "daemon/egress/egress_proxy.h"
#include "daemon/egress/egress_secrets.h"
#include "egress/proxy_fixture.h"
#include "egress/test_certificate.h"

namespace ci::daemon {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using asio::ip::tcp;
using boost::system::error_code;

constexpr std::string_view kPlainSecret = "Bearer sk-plain-0123456789";
constexpr std::string_view kTlsSecret = "Bearer sk-tls-0123456789";

auto SecretsIgnore(error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }

// Answers one request with its head as the body. The path chooses how: "/split" sends the answer
// in two writes 50 ms apart, cut inside the first secret; "/chunked" sends a chunked body cut
// there; "/gzip" claims a compressed body; anything else, one write with a Content-Length.
template <typename Socket>
asio::awaitable<void> SecretsAnswer(Socket& s, std::vector<std::string>* seen, std::mutex* mu) {
  std::string got;
  char buf[4096];
  error_code ec;
  while (got.find("\r\n\r\n") == std::string::npos) {
    size_t n = co_await s.async_read_some(asio::buffer(buf), SecretsIgnore(ec));
    if (ec) co_return;
    got.append(buf, n);
  }
  {
    std::lock_guard lock(*mu);
    seen->push_back(got);
  }
  const size_t at = got.find("sk-");
  const size_t cut = at == std::string::npos ? got.size() / 2 : at + 4;
  std::vector<std::string> parts;
  if (got.find(" /chunked ") != std::string::npos) {
    auto chunk = [](std::string_view data) {
      char size[32];
      std::snprintf(size, sizeof size, "%zx\r\n", data.size());
      return std::string(size) + std::string(data) + "\r\n";
    };
    parts.push_back("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" +
                    chunk(std::string_view(got).substr(0, cut)) +
                    chunk(std::string_view(got).substr(cut)) + "0\r\n\r\n");
  } else if (got.find(" /gzip ") != std::string::npos) {
    parts.push_back("HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: " +
                    std::to_string(got.size()) + "\r\n\r\n" + got);
  } else {
    const std::string head =
        "HTTP/1.1 200 OK\r\ncontent-length: " + std::to_string(got.size()) + "\r\n\r\n";
    parts.push_back(head + got);
    if (got.find(" /split ") != std::string::npos) {
      parts = {head + got.substr(0, cut), got.substr(cut)};
    }
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) {
      asio::steady_timer pause(s.get_executor(), std::chrono::milliseconds(50));
      co_await pause.async_wait(SecretsIgnore(ec));
    }
    co_await asio::async_write(s, asio::buffer(parts[i]), SecretsIgnore(ec));
  }
}

asio::awaitable<void> SecretsHttpServer(tcp::acceptor& acceptor, std::vector<std::string>* seen,
                                        std::mutex* mu) {
  while (true) {
    error_code ec;
    tcp::socket s = co_await acceptor.async_accept(SecretsIgnore(ec));
    if (ec) co_return;
    co_await SecretsAnswer(s, seen, mu);
    s.shutdown(tcp::socket::shutdown_both, ec);
  }
}

asio::awaitable<void> SecretsTlsServer(tcp::acceptor& acceptor, ssl::context& ctx,
                                       std::vector<std::string>* seen, std::mutex* mu) {
  while (true) {
    error_code ec;
    tcp::socket s = co_await acceptor.async_accept(SecretsIgnore(ec));
    if (ec) co_return;
    asio::co_spawn(
        acceptor.get_executor(),
        [s = std::move(s), &ctx, seen, mu]() mutable -> asio::awaitable<void> {
          ssl::stream<tcp::socket> tls(std::move(s), ctx);
          error_code e;
          co_await tls.async_handshake(ssl::stream_base::server, SecretsIgnore(e));
          if (e) co_return;
          co_await SecretsAnswer(tls, seen, mu);
          co_await tls.async_shutdown(SecretsIgnore(e));
        },
        asio::detached);
  }
}

std::shared_ptr<ssl::context> SecretsServerContext(const TestCertificate& cert) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ctx->use_certificate_chain(asio::buffer(cert.cert_pem));
  ctx->use_private_key(asio::buffer(cert.key_pem), ssl::context::pem);
  return ctx;
}

class EgressSecretsProxyTest : public ProxyFixture {
 protected:
  void SetUp() override {
    char name[] = "/tmp/egress_upstream_ca_XXXXXX";
    const int fd = ::mkstemp(name);
    ASSERT_GE(fd, 0);
    ::close(fd);
    ca_file_ = name;
    std::ofstream(ca_file_) << upstream_cert_.cert_pem;
  }

  void Start() {
    EgressProxyOptions options;
    options.policy.allow =
        ParseEgressRules("web.test, api.test, open.test, bad.test, 127.0.0.1", "allow").value();
    const auto loopback = asio::ip::make_address("127.0.0.1");
    for (const char* host : {"web.test", "api.test", "open.test", "bad.test"}) {
      options.hosts[host] = {loopback};
    }
    auto secrets = ParseEgressSecrets("web.test X-Api-Key: " + std::string(kPlainSecret) +
                                          "\napi.test Authorization: " + std::string(kTlsSecret) +
                                          "\nopen.test Authorization: " + std::string(kTlsSecret) +
                                          "\nbad.test Authorization: " + std::string(kTlsSecret),
                                      "secrets");
    options.secrets = std::make_shared<EgressSecrets>(std::move(secrets).value());
    auto interception = EgressInterception::Create(
        ParseEgressRules("api.test, bad.test", "intercept").value(), ca_file_);
    ASSERT_TRUE(interception.ok()) << interception.status().message();
    interception_ = interception.value();
    options.interception = interception_;
    asio::co_spawn(io_, SecretsHttpServer(web_, &seen_, &mu_), asio::detached);
    asio::co_spawn(io_, SecretsTlsServer(tls_, *upstream_ctx_, &seen_, &mu_), asio::detached);
    asio::co_spawn(io_, SecretsTlsServer(bad_, *bad_ctx_, &seen_, &mu_), asio::detached);
    StartProxy(std::move(options));
  }

  void TearDown() override {
    StopProxy({&web_, &tls_, &bad_});
    ::unlink(ca_file_.c_str());
  }

  // A plain-HTTP request through the proxy: the whole answer.
  std::string Get(const std::string& path, const std::string& extra_headers) {
    const std::string authority = "web.test:" + std::to_string(web_.local_endpoint().port());
    tcp::socket s(client_io_);
    s.connect(proxy_endpoint_);
    asio::write(s, asio::buffer("GET http://" + authority + path + " HTTP/1.1\r\nHost: " +
                                authority + "\r\n" + extra_headers + "\r\n"));
    return ReadAll(s);
  }

  // A request in a CONNECT tunnel to host:port, over TLS trusting only `trust_pem`.
  std::string TlsGet(const std::string& host, uint16_t port, const std::string& trust_pem,
                     const std::string& extra_headers) {
    const std::string authority = host + ":" + std::to_string(port);
    tcp::socket s(client_io_);
    s.connect(proxy_endpoint_);
    asio::write(
        s, asio::buffer("CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n"));
    std::string head;
    char c;
    while (head.find("\r\n\r\n") == std::string::npos && asio::read(s, asio::buffer(&c, 1))) {
      head += c;
    }
    if (!head.starts_with("HTTP/1.1 200")) return "CONNECT: " + head;
    ssl::context ctx(ssl::context::tls_client);
    ctx.add_certificate_authority(asio::buffer(trust_pem));
    ctx.set_verify_mode(ssl::verify_peer);
    ssl::stream<tcp::socket> tls(std::move(s), ctx);
    SetTlsPeer(tls.native_handle(), host, /*verify=*/true);
    error_code ec;
    tls.handshake(ssl::stream_base::client, ec);
    if (ec) return "handshake: " + ec.message();
    asio::write(tls, asio::buffer("GET /headers HTTP/1.1\r\nHost: " + authority + "\r\n" +
                                  extra_headers + "\r\n"));
    return ReadAll(tls);
  }

  std::vector<std::string> Seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }
  tcp::acceptor web_ = Listen(io_);
  tcp::acceptor tls_ = Listen(io_);
  tcp::acceptor bad_ = Listen(io_);
  TestCertificate upstream_cert_ = MakeTestCertificate({"api.test", "open.test"});
  TestCertificate untrusted_cert_ = MakeTestCertificate({"bad.test"});
  std::shared_ptr<ssl::context> upstream_ctx_ = SecretsServerContext(upstream_cert_);
  std::shared_ptr<ssl::context> bad_ctx_ = SecretsServerContext(untrusted_cert_);
  std::string ca_file_;
  std::shared_ptr<EgressInterception> interception_;
  std::mutex mu_;
  std::vector<std::string> seen_;  // request heads, as the servers received them
};

TEST_F(EgressSecretsProxyTest, PlainHttpGetsTheSecretAndTheSandboxOnlyItsMask) {
  Start();
  const std::string mask(kPlainSecret.size(), '*');
  const std::string got = Get("/", "X-API-KEY: mine-own-key\r\nAccept-Encoding: gzip, br\r\n");
  ASSERT_TRUE(got.starts_with("HTTP/1.1 200 OK\r\n")) << got;
  auto seen = Seen();
  ASSERT_EQ(seen.size(), 1u);
  // The server got the secret instead of the client's own header, and asked for no compression.
  EXPECT_NE(seen[0].find("X-Api-Key: " + std::string(kPlainSecret) + "\r\n"), std::string::npos)
      << seen[0];
  EXPECT_EQ(seen[0].find("mine-own-key"), std::string::npos) << seen[0];
  EXPECT_NE(seen[0].find("accept-encoding: identity\r\n"), std::string::npos) << seen[0];
  EXPECT_EQ(seen[0].find("gzip"), std::string::npos) << seen[0];
  // The echo came back masked, with the same length (its Content-Length holds).
  EXPECT_EQ(got.find("sk-plain"), std::string::npos) << got;
  EXPECT_NE(got.find("X-Api-Key: " + mask + "\r\n"), std::string::npos) << got;
  std::string masked = seen[0];
  masked.replace(masked.find(kPlainSecret), kPlainSecret.size(), mask);
  EXPECT_EQ(got, "HTTP/1.1 200 OK\r\ncontent-length: " + std::to_string(seen[0].size()) +
                     "\r\n\r\n" + masked);
  EgressReport report = Report();
  ASSERT_EQ(report.reached.size(), 1u);
  EXPECT_EQ(report.reached[0].bytes_in, got.size());
}

TEST_F(EgressSecretsProxyTest, AValueCutBetweenReadsOrChunksIsMaskedToo) {
  Start();
  const std::string split = Get("/split", "");
  ASSERT_TRUE(split.starts_with("HTTP/1.1 200 OK\r\n")) << split;
  EXPECT_EQ(split.find("sk-pl"), std::string::npos) << split;
  EXPECT_NE(split.find("X-Api-Key: " + std::string(kPlainSecret.size(), '*')), std::string::npos)
      << split;
  const std::string chunked = Get("/chunked", "");
  ASSERT_TRUE(chunked.starts_with("HTTP/1.1 200 OK\r\n")) << chunked;
  // Decoded: no framing left to split the value, which is masked whole.
  EXPECT_EQ(chunked.find("transfer-encoding"), std::string::npos) << chunked;
  EXPECT_NE(chunked.find("connection: close\r\n"), std::string::npos) << chunked;
  EXPECT_EQ(chunked.find("sk-pl"), std::string::npos) << chunked;
  EXPECT_NE(chunked.find("X-Api-Key: " + std::string(kPlainSecret.size(), '*') + "\r\n"),
            std::string::npos)
      << chunked;
  EXPECT_TRUE(chunked.ends_with("\r\n\r\n")) << chunked;  // the echoed head, without "0\r\n"
}

TEST_F(EgressSecretsProxyTest, ACompressedAnswerIsRefusedWithoutAByteOfIt) {
  Start();
  const std::string got = Get("/gzip", "");
  EXPECT_TRUE(got.starts_with("HTTP/1.1 502 Bad Gateway\r\n")) << got;
  EXPECT_NE(got.find("compressed"), std::string::npos) << got;
  EXPECT_EQ(got.find("sk-"), std::string::npos) << got;
  EgressReport report = Report();
  ASSERT_EQ(report.refused.size(), 1u);
  EXPECT_EQ(report.refused[0].host, "web.test");
}

TEST_F(EgressSecretsProxyTest, AnInterceptedTunnelGetsTheSecretAndTheSandboxOnlyItsMask) {
  Start();
  const uint16_t port = tls_.local_endpoint().port();
  const std::string got =
      TlsGet("api.test", port, interception_->ca().pem(), "Authorization: Bearer mine-own\r\n");
  ASSERT_TRUE(got.starts_with("HTTP/1.1 200 OK\r\n")) << got;
  auto seen = Seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].starts_with("GET /headers HTTP/1.1\r\n")) << seen[0];
  EXPECT_NE(seen[0].find("Authorization: " + std::string(kTlsSecret) + "\r\n"), std::string::npos)
      << seen[0];
  EXPECT_EQ(seen[0].find("mine-own"), std::string::npos) << seen[0];
  EXPECT_NE(seen[0].find("host: api.test:" + std::to_string(port) + "\r\n"), std::string::npos);
  EXPECT_NE(seen[0].find("connection: close\r\n"), std::string::npos);
  EXPECT_EQ(got.find("sk-tls"), std::string::npos) << got;
  EXPECT_NE(got.find("Authorization: " + std::string(kTlsSecret.size(), '*')), std::string::npos)
      << got;
  EgressReport report = Report();
  ASSERT_EQ(report.reached.size(), 1u);
  EXPECT_EQ(report.reached[0].host, "api.test");
  EXPECT_EQ(report.reached[0].bytes_in, got.size());
  EXPECT_EQ(report.reached[0].bytes_out, seen[0].size());
  EXPECT_EQ(report.refused_count, 0u);
  // A sandbox that does not trust the daemon's CA learns nothing; the refusal says why.
  const std::string untrusting = TlsGet("api.test", port, upstream_cert_.cert_pem, "");
  EXPECT_TRUE(untrusting.starts_with("handshake: ")) << untrusting;
  // The proxy reads the client's alert after the client has given up: wait for its note.
  for (int i = 0; i < 200 && Report().refused.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  report = Report();
  ASSERT_EQ(report.refused.size(), 1u);
  EXPECT_NE(report.refused[0].reason.find("daemon's CA"), std::string::npos);
}

TEST_F(EgressSecretsProxyTest, ATunnelToAHostNotInterceptedStaysOpaque) {
  Start();
  // The sandbox talks TLS with the real server (it trusts that server's certificate, never the
  // daemon's CA), so the proxy has nowhere to add open.test's secret.
  const std::string got = TlsGet("open.test", tls_.local_endpoint().port(), upstream_cert_.cert_pem,
                                 "Authorization: Bearer mine-own\r\n");
  ASSERT_TRUE(got.starts_with("HTTP/1.1 200 OK\r\n")) << got;
  auto seen = Seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].find("sk-tls"), std::string::npos) << seen[0];
  EXPECT_NE(seen[0].find("Authorization: Bearer mine-own\r\n"), std::string::npos) << seen[0];
  EXPECT_EQ(Report().reached.size(), 1u);
}

TEST_F(EgressSecretsProxyTest, AnUpstreamWhoseCertificateDoesNotVerifyIsRefused) {
  Start();
  const std::string got =
      TlsGet("bad.test", bad_.local_endpoint().port(), interception_->ca().pem(), "");
  EXPECT_TRUE(got.starts_with("HTTP/1.1 502 Bad Gateway\r\n")) << got;
  EXPECT_NE(got.find("the certificate of bad.test does not verify"), std::string::npos) << got;
  EXPECT_TRUE(Seen().empty());  // no request reached it
  EgressReport report = Report();
  EXPECT_TRUE(report.reached.empty());
  ASSERT_EQ(report.refused.size(), 1u);
  EXPECT_EQ(report.refused[0].host, "bad.test");
  EXPECT_NE(report.refused[0].reason.find("does not verify"), std::string::npos);
  EXPECT_EQ(report.refused[0].reason.find("sk-"), std::string::npos);
}

TEST(EgressInterception, TheSandboxBundleIsTheSystemsThenTheDaemonCa) {
  auto interception = EgressInterception::Create({}, "");
  ASSERT_TRUE(interception.ok()) << interception.status().message();
  const std::string& pem = interception.value()->ca().pem();
  EXPECT_TRUE(pem.starts_with("-----BEGIN CERTIFICATE-----")) << pem;
  auto bundle = interception.value()->SandboxTrustBundle();
  if (!bundle.ok()) GTEST_SKIP() << bundle.status().message();  // no system bundle here
  EXPECT_TRUE(bundle->ends_with(pem));
  EXPECT_GT(bundle->size(), pem.size());
  EXPECT_FALSE(EgressInterception::Create(ParseEgressRules("10.0.0.0/8", "x").value(), "").ok());
  EXPECT_FALSE(EgressInterception::Create({}, "/nonexistent/ca.pem").ok());
}

}  // namespace
}  // namespace ci::daemon
