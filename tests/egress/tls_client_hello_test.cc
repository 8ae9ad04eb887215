#include "daemon/egress/tls_client_hello.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "egress/client_hello_bytes.h"

namespace ci::daemon {
namespace {

TEST(ClientHelloTest, ReadsTheServerName) {
  ClientHello hello = ParseClientHello(ClientHelloBytes({"pypi.org"}));
  EXPECT_EQ(hello.state, ClientHello::State::kDone);
  EXPECT_EQ(hello.server_name, "pypi.org");
  hello = ParseClientHello(ClientHelloBytes({}));
  EXPECT_EQ(hello.state, ClientHello::State::kDone);
  EXPECT_EQ(hello.server_name, std::nullopt);
}

TEST(ClientHelloTest, WaitsForTheWholeHelloAcrossRecords) {
  const std::string whole = ClientHelloBytes({"files.test"});
  for (size_t n = 0; n < whole.size(); ++n) {
    EXPECT_EQ(ParseClientHello(whole.substr(0, n)).state, ClientHello::State::kNeedMore) << n;
  }
  const std::string split = ClientHelloBytes({"files.test"}, /*records=*/3);
  ClientHello hello = ParseClientHello(split);
  EXPECT_EQ(hello.state, ClientHello::State::kDone);
  EXPECT_EQ(hello.server_name, "files.test");
  EXPECT_EQ(ParseClientHello(split.substr(0, split.size() - 1)).state,
            ClientHello::State::kNeedMore);
}

TEST(ClientHelloTest, AnythingElseIsNotTls) {
  for (std::string bytes : {std::string("GET / HTTP/1.1\r\n"), std::string("SSH-2.0-x\r\n"),
                            std::string("\x16\x01\x00\x00\x04\x02\x00\x00\x00", 9)}) {
    EXPECT_EQ(ParseClientHello(bytes).state, ClientHello::State::kNotTls) << bytes;
  }
  // Two server names: refused whole, whichever a reader would take.
  EXPECT_EQ(ParseClientHello(ClientHelloBytes({"a.test", "b.test"}, 1, true)).state,
            ClientHello::State::kNotTls);
  EXPECT_EQ(ParseClientHello(std::string(kMaxClientHello + 1, '\x16')).state,
            ClientHello::State::kNotTls);
}

}  // namespace
}  // namespace ci::daemon
