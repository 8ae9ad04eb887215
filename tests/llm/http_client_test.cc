// The HTTP client: URLs, then real sockets on 127.0.0.1 — plain and TLS servers answering canned
// bytes, servers that never answer, nothing listening, certificates nobody trusts or for another
// name, a chunked answer and one over the size cap.
#include "llm/http_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <variant>

#include "canned_server.h"
#include "common/await.h"
#include "test_pki.h"

namespace ci::llm {
namespace {

using test_support::CannedServer;
using test_support::HttpResponse;
using test_support::Pki;
using test_support::ScopedEnv;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_support::AwaitOn;

TEST(ParseUrl, TakesSchemeHostPortAndPath) {
  Result<Url> u = ParseUrl("https://api.openai.com/v1/chat/completions");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->scheme, "https");
  EXPECT_TRUE(u->tls());
  EXPECT_EQ(u->host, "api.openai.com");
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->path, "/v1/chat/completions");
  EXPECT_EQ(u->HostPort(), "api.openai.com:443");

  u = ParseUrl("http://localhost:11434/v1");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_FALSE(u->tls());
  EXPECT_EQ(u->host, "localhost");
  EXPECT_EQ(u->port, 11434);
  EXPECT_EQ(u->path, "/v1");

  u = ParseUrl("HTTP://example.com");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->scheme, "http");
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->path, "");

  u = ParseUrl("http://[::1]:8080/v1");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->HostPort(), "[::1]:8080");
  u = ParseUrl("https://[fe80::1]");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->host, "fe80::1");
  EXPECT_EQ(u->port, 443);
}

TEST(ParseUrl, SaysWhatIsWrong) {
  auto error = [](const char* text) {
    Result<Url> u = ParseUrl(text);
    EXPECT_FALSE(u.ok()) << text;
    return u.ok() ? std::string() : u.status().message();
  };
  EXPECT_THAT(error("ftp://example.com"), HasSubstr("http:// or https://"));
  EXPECT_THAT(error("example.com/v1"), HasSubstr("http:// or https://"));
  EXPECT_THAT(error("https://"), HasSubstr("no host"));
  EXPECT_THAT(error("https://:8080/v1"), HasSubstr("no host"));
  EXPECT_THAT(error("http://h:0"), HasSubstr("port"));
  EXPECT_THAT(error("http://h:65536"), HasSubstr("port"));
  EXPECT_THAT(error("http://h:"), HasSubstr("port"));
  EXPECT_THAT(error("http://h:8a"), HasSubstr("port"));
  EXPECT_THAT(error("http://user:pw@h/v1"), HasSubstr("user info"));
  EXPECT_THAT(error("http://h/v1?key=x"), HasSubstr("query"));
  EXPECT_THAT(error("http://h/a b"), HasSubstr("whitespace"));
  EXPECT_THAT(error("http://h/a\r\nX: y"), HasSubstr("control character"));
  EXPECT_THAT(error("http://[::1/v1"), HasSubstr("']'"));
  EXPECT_THAT(error("http://[zz]:80"), HasSubstr("IPv6"));
  EXPECT_THAT(error("http://[::1]x"), HasSubstr("after the ']'"));
}

class HttpClientTest : public ::testing::Test {
 protected:
  HttpResult Post(const std::string& url_text, std::chrono::milliseconds timeout,
                  const std::string& body = R"({"q":1})") {
    Result<Url> url = ParseUrl(url_text);
    EXPECT_TRUE(url.ok()) << url.status().message();
    const Url& target = url.value();
    return AwaitOn(io_, PostJson(io_.get_executor(), target, headers_, body, timeout));
  }

  static HttpReply ExpectReply(const HttpResult& r) {
    if (const auto* f = std::get_if<HttpFailure>(&r)) {
      ADD_FAILURE() << "failed: " << f->message;
      return {};
    }
    return std::get<HttpReply>(r);
  }

  static HttpFailure ExpectFailure(const HttpResult& r) {
    if (!std::holds_alternative<HttpFailure>(r)) {
      ADD_FAILURE() << "a reply, not a failure";
      return {};
    }
    return std::get<HttpFailure>(r);
  }

  std::string Local(uint16_t port, const std::string& scheme = "http") {
    return scheme + "://127.0.0.1:" + std::to_string(port);
  }

  static constexpr std::chrono::milliseconds kShort{300};
  static constexpr std::chrono::milliseconds kLong{20000};
  boost::asio::io_context io_;
  std::vector<HttpHeader> headers_ = {{"X-Test", "yes"}};
};

TEST_F(HttpClientTest, PostsJsonAndReadsTheReply) {
  CannedServer server(io_, HttpResponse(201, R"({"ok":true})"));
  HttpReply r = ExpectReply(Post(Local(server.port()) + "/v1/chat/completions", kLong));
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.body, R"({"ok":true})");
  ASSERT_EQ(server.requests().size(), 1u);
  const auto& req = server.requests()[0];
  EXPECT_EQ(req.request_line, "POST /v1/chat/completions HTTP/1.1");
  EXPECT_EQ(req.Header("host"), "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(req.Header("content-type"), "application/json");
  EXPECT_EQ(req.Header("x-test"), "yes");
  EXPECT_EQ(req.body, R"({"q":1})");
}

TEST_F(HttpClientTest, AnErrorStatusIsAReply) {
  CannedServer server(io_, HttpResponse(503, "busy"));
  HttpReply r = ExpectReply(Post(Local(server.port()), kLong));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, "busy");
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].request_line, "POST / HTTP/1.1");
}

TEST_F(HttpClientTest, ReadsAChunkedReply) {
  CannedServer server(io_, test_support::ChunkedResponse(200, {R"({"a":)", R"("bc)", R"("})"}));
  HttpReply r = ExpectReply(Post(Local(server.port()), kLong));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"a":"bc"})");
}

TEST_F(HttpClientTest, ARepliesBodyIsCapped) {
  const std::string head =
      "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(kMaxReplyBody + 1) + "\r\n\r\n" +
      "{\"a\":";
  CannedServer server(io_, head);
  HttpFailure f = ExpectFailure(Post(Local(server.port()), kLong));
  EXPECT_FALSE(f.timed_out);
  EXPECT_THAT(f.message, HasSubstr("larger than 16 MiB"));
  EXPECT_THAT(f.message, HasSubstr("127.0.0.1:" + std::to_string(server.port())));
}

TEST_F(HttpClientTest, AChunkedReplysBodyIsCappedToo) {
  char size[32];
  std::snprintf(size, sizeof(size), "%zx", kMaxReplyBody + 1);
  const std::string head =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(size) + "\r\n{\"a\":";
  CannedServer server(io_, head);
  HttpFailure f = ExpectFailure(Post(Local(server.port()), kLong));
  EXPECT_FALSE(f.timed_out);
  EXPECT_THAT(f.message, HasSubstr("larger than 16 MiB"));
}

TEST_F(HttpClientTest, AnAnswerThatIsNoHttpIsAFailure) {
  CannedServer server(io_, "SSH-2.0-OpenSSH_9.2\r\n\r\n");
  HttpFailure f = ExpectFailure(Post(Local(server.port()), kLong));
  EXPECT_FALSE(f.timed_out);
  EXPECT_THAT(f.message, HasSubstr("reading from 127.0.0.1:" + std::to_string(server.port())));
}

TEST_F(HttpClientTest, AServerThatNeverAnswersTimesOut) {
  CannedServer server(io_, "");
  HttpFailure f = ExpectFailure(Post(Local(server.port()), kShort));
  EXPECT_TRUE(f.timed_out) << f.message;
  EXPECT_EQ(f.message,
            "no answer from 127.0.0.1:" + std::to_string(server.port()) + " within 300 ms");
  EXPECT_EQ(server.requests().size(), 1u) << "the request was sent whole";
}

TEST_F(HttpClientTest, ATlsHandshakeThatNeverEndsTimesOut) {
  CannedServer server(io_, "");
  HttpFailure f = ExpectFailure(Post(Local(server.port(), "https"), kShort));
  EXPECT_TRUE(f.timed_out) << f.message;
  EXPECT_THAT(f.message, HasSubstr("within 300 ms"));
}

TEST_F(HttpClientTest, NothingListeningIsNoTimeout) {
  const uint16_t port = test_support::ClosedPort(io_);
  HttpFailure f = ExpectFailure(Post(Local(port), kLong));
  EXPECT_FALSE(f.timed_out);
  EXPECT_THAT(f.message, HasSubstr("connecting to 127.0.0.1:" + std::to_string(port)));
  EXPECT_THAT(f.message, HasSubstr("refused"));
}

TEST_F(HttpClientTest, HttpsWithACertificateFromTheTrustStore) {
  ScopedEnv trust("SSL_CERT_FILE", Pki().trusted_ca_file);
  CannedServer server(io_, HttpResponse(200, R"({"tls":true})"),
                      CannedServer::Tls(Pki().localhost.cert_pem, Pki().localhost.key_pem));
  HttpReply r = ExpectReply(Post(Local(server.port(), "https") + "/v1", kLong));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"tls":true})");
  // By name too: resolved, sent as SNI, checked against the DNS SAN.
  r = ExpectReply(Post("https://localhost:" + std::to_string(server.port()) + "/v1", kLong));
  EXPECT_EQ(r.status, 200);
  ASSERT_EQ(server.requests().size(), 2u);
  EXPECT_EQ(server.requests()[1].Header("host"), "localhost:" + std::to_string(server.port()));
}

TEST_F(HttpClientTest, AnUntrustedCertificateIsRefused) {
  ScopedEnv trust("SSL_CERT_FILE", Pki().trusted_ca_file);
  CannedServer server(
      io_, HttpResponse(200, "{}"),
      CannedServer::Tls(Pki().from_untrusted.cert_pem, Pki().from_untrusted.key_pem));
  HttpFailure f = ExpectFailure(Post(Local(server.port(), "https"), kLong));
  EXPECT_FALSE(f.timed_out);
  EXPECT_THAT(f.message,
              HasSubstr("TLS handshake with 127.0.0.1:" + std::to_string(server.port())));
  EXPECT_THAT(f.message, HasSubstr("certificate verify failed"));
  EXPECT_TRUE(server.requests().empty()) << "nothing was sent to a server nobody trusts";
}

TEST_F(HttpClientTest, TheTrustStoreIsTheEnvironmentsOfTheMoment) {
  CannedServer server(io_, HttpResponse(200, "{}"),
                      CannedServer::Tls(Pki().localhost.cert_pem, Pki().localhost.key_pem));
  {
    ScopedEnv other("SSL_CERT_FILE", Pki().untrusted_ca_file);
    HttpFailure f = ExpectFailure(Post(Local(server.port(), "https"), kLong));
    EXPECT_THAT(f.message, HasSubstr("certificate verify failed"));
  }
  ScopedEnv trust("SSL_CERT_FILE", Pki().trusted_ca_file);
  EXPECT_EQ(ExpectReply(Post(Local(server.port(), "https"), kLong)).status, 200);
}

TEST_F(HttpClientTest, ACertificateForAnotherNameIsRefused) {
  ScopedEnv trust("SSL_CERT_FILE", Pki().trusted_ca_file);
  CannedServer server(io_, HttpResponse(200, "{}"),
                      CannedServer::Tls(Pki().other_name.cert_pem, Pki().other_name.key_pem));
  HttpFailure f = ExpectFailure(Post(Local(server.port(), "https"), kLong));
  EXPECT_THAT(f.message, HasSubstr("certificate verify failed"));
  EXPECT_THAT(f.message, HasSubstr("mismatch"));
  f = ExpectFailure(Post("https://localhost:" + std::to_string(server.port()), kLong));
  EXPECT_THAT(f.message, HasSubstr("certificate verify failed"));
  EXPECT_THAT(f.message, HasSubstr("mismatch"));
  EXPECT_THAT(f.message, Not(HasSubstr("timed out")));
}

}  // namespace
}  // namespace ci::llm
