// The egress proxy over real sockets on loopback: the proxy and the destinations (an echo server
// standing in for a TLS server, whose bytes the proxy never decrypts, and a small HTTP server)
// run on an io_context thread; each test is a blocking client, as a sandbox's program would be.
#include "daemon/egress/egress_proxy.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <future>
#include <thread>

#include "egress/client_hello_bytes.h"
#include "egress/proxy_fixture.h"

namespace ci::daemon {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// Echoes every connection's bytes back until it closes.
asio::awaitable<void> EchoServer(tcp::acceptor& acceptor) {
  while (true) {
    boost::system::error_code ec;
    tcp::socket s = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    asio::co_spawn(
        acceptor.get_executor(),
        [s = std::move(s)]() mutable -> asio::awaitable<void> {
          char buf[4096];
          boost::system::error_code e;
          while (true) {
            size_t n = co_await s.async_read_some(asio::buffer(buf),
                                                  asio::redirect_error(asio::use_awaitable, e));
            if (e) co_return;
            co_await asio::async_write(s, asio::buffer(buf, n),
                                       asio::redirect_error(asio::use_awaitable, e));
          }
        },
        asio::detached);
  }
}

// Answers one request per connection with the request's head as its body.
asio::awaitable<void> HeadServer(tcp::acceptor& acceptor) {
  while (true) {
    boost::system::error_code ec;
    tcp::socket s = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    std::string got;
    char buf[4096];
    while (got.find("\r\n\r\n") == std::string::npos) {
      size_t n = co_await s.async_read_some(asio::buffer(buf),
                                            asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      got.append(buf, n);
    }
    std::string answer = "HTTP/1.1 200 OK\r\ncontent-length: " + std::to_string(got.size()) +
                         "\r\nconnection: close\r\n\r\n" + got;
    co_await asio::async_write(s, asio::buffer(answer),
                               asio::redirect_error(asio::use_awaitable, ec));
    s.shutdown(tcp::socket::shutdown_both, ec);
  }
}

class EgressProxyTest : public ProxyFixture {
 protected:
  void Start(std::string_view allow, size_t max_connections = 64) {
    EgressProxyOptions options;
    options.policy.allow = ParseEgressRules(allow, "allow").value();
    const auto loopback = asio::ip::make_address("127.0.0.1");
    options.hosts["tls.test"] = {loopback};
    options.hosts["web.test"] = {loopback};
    options.hosts["metadata.test"] = {asio::ip::make_address("169.254.169.254")};
    options.max_connections = max_connections;
    asio::co_spawn(io_, EchoServer(echo_), asio::detached);
    asio::co_spawn(io_, HeadServer(web_), asio::detached);
    StartProxy(std::move(options));
  }

  void TearDown() override { StopProxy({&echo_, &web_}); }
  uint16_t echo_port() const { return echo_.local_endpoint().port(); }
  uint16_t web_port() const { return web_.local_endpoint().port(); }

  // A connection to the proxy that sends `request` and reads the answer's head.
  tcp::socket Ask(const std::string& request, std::string* head) {
    tcp::socket s(client_io_);
    s.connect(proxy_endpoint_);
    asio::write(s, asio::buffer(request));
    head->clear();
    char c;
    while (head->find("\r\n\r\n") == std::string::npos && asio::read(s, asio::buffer(&c, 1))) {
      *head += c;
    }
    return s;
  }
  static std::string ConnectRequest(const std::string& authority) {
    return "CONNECT " + authority + " HTTP/1.1\r\nhost: " + authority + "\r\n\r\n";
  }
  tcp::acceptor echo_ = Listen(io_);
  tcp::acceptor web_ = Listen(io_);
};

TEST_F(EgressProxyTest, ATunnelToAnAllowedNameCarriesItsTls) {
  Start("tls.test, 127.0.0.1");
  std::string head;
  const std::string authority = "tls.test:" + std::to_string(echo_port());
  tcp::socket s = Ask(ConnectRequest(authority), &head);
  EXPECT_EQ(head, "HTTP/1.1 200 Connection established\r\n\r\n");
  const std::string hello = ClientHelloBytes({"tls.test"}, 2);
  asio::write(s, asio::buffer(hello));
  std::string echoed(hello.size(), '\0');
  asio::read(s, asio::buffer(echoed));
  EXPECT_EQ(echoed, hello);
  s.close();
  EgressReport report = Report();
  ASSERT_EQ(report.reached.size(), 1u);
  EXPECT_EQ(report.reached[0].host, "tls.test");
  EXPECT_EQ(report.reached[0].bytes_out, hello.size());
  EXPECT_EQ(report.refused_count, 0u);
}

TEST_F(EgressProxyTest, ATunnelWhoseServerNameIsAnotherHostIsClosed) {
  Start("tls.test, 127.0.0.1");
  for (auto names : {std::vector<std::string>{"evil.test"}, std::vector<std::string>{}}) {
    std::string head;
    tcp::socket s = Ask(ConnectRequest("tls.test:" + std::to_string(echo_port())), &head);
    ASSERT_EQ(head, "HTTP/1.1 200 Connection established\r\n\r\n");
    asio::write(s, asio::buffer(ClientHelloBytes(names)));
    EXPECT_EQ(ReadAll(s), "");  // nothing reached the server, nothing came back
  }
  std::string head;
  tcp::socket s = Ask(ConnectRequest("tls.test:" + std::to_string(echo_port())), &head);
  asio::write(s, asio::buffer(std::string("SSH-2.0-OpenSSH\r\n")));
  EXPECT_EQ(ReadAll(s), "");
  EgressReport report = Report();
  EXPECT_TRUE(report.reached.empty());
  ASSERT_EQ(report.refused.size(), 3u);
  EXPECT_EQ(report.refused[0].reason, "the ClientHello names evil.test, the CONNECT tls.test");
  EXPECT_NE(report.refused[1].reason.find("names no server"), std::string::npos);
  EXPECT_NE(report.refused[2].reason.find("TLS only"), std::string::npos);
}

TEST_F(EgressProxyTest, DestinationsOutsideThePolicyAreRefusedWithTheReason) {
  Start("tls.test, metadata.test");  // no CIDR rule: loopback and link-local stay out of reach
  const std::string port = std::to_string(echo_port());
  struct Case {
    std::string authority, says;
  };
  for (const Case& c :
       {Case{"other.test:" + port, "not allowed"},
        Case{"tls.test:" + port, "127.0.0.1, an address this sandbox may not"},
        Case{"metadata.test:80", "169.254.169.254"}, Case{"127.0.0.1:" + port, "not allowed"},
        Case{"[::1]:" + port, "not allowed"}, Case{"[::ffff:127.0.0.1]:" + port, "not allowed"}}) {
    std::string head;
    tcp::socket s = Ask(ConnectRequest(c.authority), &head);
    EXPECT_TRUE(head.starts_with("HTTP/1.1 403 Forbidden\r\n")) << c.authority << ": " << head;
    EXPECT_NE(ReadAll(s).find(c.says), std::string::npos) << c.authority;
  }
  EXPECT_EQ(Report().refused_count, 6u);
}

TEST_F(EgressProxyTest, PlainHttpIsForwardedWithoutTheProxysHeaders) {
  Start("web.test, 127.0.0.1");
  const std::string authority = "web.test:" + std::to_string(web_port());
  std::string head;
  tcp::socket s =
      Ask("GET http://" + authority + "/simple/pkg/?q=1 HTTP/1.1\r\nHost: " + authority +
              "\r\nProxy-Authorization: Basic eDp5\r\nProxy-Connection: keep-alive\r\n"
              "Accept: */*\r\n\r\n",
          &head);
  EXPECT_TRUE(head.starts_with("HTTP/1.1 200 OK\r\n")) << head;
  const std::string got = ReadAll(s);
  EXPECT_TRUE(got.starts_with("GET /simple/pkg/?q=1 HTTP/1.1\r\n")) << got;
  EXPECT_NE(got.find("accept: */*\r\n"), std::string::npos) << got;
  EXPECT_NE(got.find("host: " + authority + "\r\n"), std::string::npos) << got;
  EXPECT_NE(got.find("connection: close\r\n"), std::string::npos) << got;
  EXPECT_EQ(got.find("roxy"), std::string::npos) << got;
}

TEST_F(EgressProxyTest, MalformedRequestsAreRefusedByName) {
  Start("web.test, 127.0.0.1");
  const std::string authority = "web.test:" + std::to_string(web_port());
  struct Case {
    std::string request, status, says;
  };
  for (const Case& c :
       {Case{"GET /local HTTP/1.1\r\n\r\n", "400", "absolute form"},
        Case{"GET https://" + authority + "/ HTTP/1.1\r\n\r\n", "400", "absolute form"},
        Case{"GET http://" + authority + "/ HTTP/1.1\r\nHost: other.test\r\n\r\n", "400",
             "Host header"},
        Case{"GET http://user@" + authority + "/ HTTP/1.1\r\n\r\n", "400", "authority"},
        Case{"POST http://" + authority + "/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", "501",
             "chunked"},
        Case{"CONNECT web.test HTTP/1.1\r\n\r\n", "400", "host:port"},
        Case{"HELLO\r\n\r\n", "400", "HTTP/1"},
        Case{"GET http://" + authority + "/ HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n",
             "431", "too large"}}) {
    std::string head;
    tcp::socket s = Ask(c.request, &head);
    EXPECT_TRUE(head.starts_with("HTTP/1.1 " + c.status)) << c.request.substr(0, 60) << head;
    EXPECT_NE(ReadAll(s).find(c.says), std::string::npos) << c.request.substr(0, 60);
  }
}

TEST_F(EgressProxyTest, CloseAllEndsOpenTunnels) {
  Start("tls.test, 127.0.0.1");
  std::string head;
  tcp::socket s = Ask(ConnectRequest("tls.test:" + std::to_string(echo_port())), &head);
  const std::string hello = ClientHelloBytes({"tls.test"});
  asio::write(s, asio::buffer(hello));
  std::string echoed(hello.size(), '\0');
  asio::read(s, asio::buffer(echoed));
  // The echo server never closes: the program's end does.
  asio::post(io_, [this] { proxy_->CloseAll(); });
  EXPECT_EQ(ReadAll(s), "");
}

TEST_F(EgressProxyTest, ConnectionsPastTheLimitAreRefused) {
  Start("tls.test, 127.0.0.1", /*max_connections=*/2);
  const std::string authority = "tls.test:" + std::to_string(echo_port());
  std::string head;
  tcp::socket a = Ask(ConnectRequest(authority), &head);
  tcp::socket b = Ask(ConnectRequest(authority), &head);
  ASSERT_EQ(head, "HTTP/1.1 200 Connection established\r\n\r\n");
  tcp::socket c = Ask(ConnectRequest(authority), &head);
  EXPECT_TRUE(head.starts_with("HTTP/1.1 503")) << head;
  a.close();
  b.close();
}

}  // namespace
}  // namespace ci::daemon
