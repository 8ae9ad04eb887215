// The secrets file: its lines, errors that name the line and never a value, lookups by
// destination, and re-reading it when it changes (keeping the last good secrets when the new
// version is bad).
#include "daemon/egress/egress_secrets.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace ci::daemon {
namespace {

TEST(EgressSecrets, LinesAreDestinationHeaderAndValue) {
  auto parsed = ParseEgressSecrets(
      "# the model's key\n"
      "\n"
      "api.test Authorization: Bearer sk-one-secret\n"
      "  *.pkgs.test:8443   X-Token:   tok-two-secret  \n",
      "secrets");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].destination.ToString(), "api.test");
  EXPECT_EQ((*parsed)[0].header, "Authorization");
  EXPECT_EQ((*parsed)[0].value, "Bearer sk-one-secret");
  EXPECT_EQ((*parsed)[1].destination.ToString(), "*.pkgs.test:8443");
  EXPECT_EQ((*parsed)[1].value, "tok-two-secret");
}

TEST(EgressSecrets, ErrorsNameTheLineNeverTheValue) {
  struct Case {
    std::string text, says;
  };
  for (const Case& c : {
           Case{"api.test\n", "line 1: expected"},
           Case{"# ok\napi.test Authorization Bearer sk-hidden-value\n",
                "line 2: expected a header"},
           Case{"sk-hidden/value api.test Authorization: x\n", "line 1: the first word"},
           Case{"10.0.0.0/8 Authorization: sk-hidden-value\n", "line 1: a secret's destination"},
           Case{"1.2.3.4 Authorization: sk-hidden-value\n", "line 1: a secret's destination"},
           Case{"api.test Bad Name: sk-hidden-value\n", "line 1: expected a header"},
           Case{"api.test Host: sk-hidden-value\n", "line 1: the proxy sets Host"},
           Case{"api.test Proxy-Authorization: sk-hidden-value\n", "line 1: the proxy sets"},
           Case{"api.test Authorization: sk-hid\n", "line 1: the value is shorter than 8"},
           Case{"api.test Authorization: sk-hidden\x01value\n", "line 1: the value has a control"},
           Case{"api.test X-A: sk-hidden-value\n\napi.test x-a: sk-hidden-value2\n",
                "line 3: x-a for api.test is set on an earlier line"},
       }) {
    auto parsed = ParseEgressSecrets(c.text, "/etc/ci/secrets");
    ASSERT_FALSE(parsed.ok()) << c.text;
    const std::string& message = parsed.status().message();
    EXPECT_TRUE(message.starts_with("/etc/ci/secrets line")) << message;
    EXPECT_NE(message.find(c.says), std::string::npos) << message;
    EXPECT_EQ(message.find("sk-hid"), std::string::npos) << message;
  }
}

TEST(EgressSecrets, LookupsMatchDomainsWildcardsAndPorts) {
  auto parsed = ParseEgressSecrets(
      "api.test Authorization: Bearer sk-exact-one\n"
      "*.api.test:443 Authorization: Bearer sk-sub-one\n"
      "*.api.test X-Other: other-secret\n"
      "api.test AUTHORIZATION: Bearer sk-second-wins-not\n",
      "secrets");
  ASSERT_FALSE(parsed.ok());  // the same header twice for one destination
  parsed = ParseEgressSecrets(
      "api.test Authorization: Bearer sk-exact-one\n"
      "*.api.test:443 Authorization: Bearer sk-sub-one\n"
      "*.api.test X-Other: other-secret\n"
      "*.test authorization: Bearer sk-below-the-first\n",
      "secrets");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EgressSecrets secrets(std::move(parsed).value());
  auto exact = secrets.For("api.test", 80);
  ASSERT_EQ(exact.size(), 1u);  // the first line for a header wins
  EXPECT_EQ(exact[0].value, "Bearer sk-exact-one");
  auto sub = secrets.For("eu.api.test", 443);
  ASSERT_EQ(sub.size(), 2u);
  EXPECT_EQ(sub[0].value, "Bearer sk-sub-one");
  EXPECT_EQ(sub[1].header, "X-Other");
  auto other_port = secrets.For("eu.api.test", 8443);
  ASSERT_EQ(other_port.size(), 2u);
  EXPECT_EQ(other_port[0].header, "X-Other");
  EXPECT_EQ(other_port[1].value, "Bearer sk-below-the-first");
  EXPECT_TRUE(secrets.For("elsewhere.org", 443).empty());
}

class EgressSecretsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/egress_secrets_XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/secrets";
  }
  void TearDown() override {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  // Written to another name and renamed over, as an operator's tooling would.
  void Write(const std::string& text) {
    const std::string tmp = dir_ + "/.new";
    std::ofstream(tmp) << text;
    ASSERT_EQ(::rename(tmp.c_str(), path_.c_str()), 0);
  }
  std::string dir_, path_;
};

TEST_F(EgressSecretsFileTest, AChangedFileIsReadAgainAndABadOneKeepsTheLastGood) {
  Write("api.test X-Key: first-secret\n");
  auto opened = EgressSecrets::Open(path_);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  std::shared_ptr<EgressSecrets> secrets = opened.value();
  ASSERT_EQ(secrets->For("api.test", 443).size(), 1u);
  EXPECT_EQ(secrets->For("api.test", 443)[0].value, "first-secret");
  Write("api.test X-Key: second-secret\nother.test X-Key: third-secret\n");
  ASSERT_EQ(secrets->For("api.test", 443).size(), 1u);
  EXPECT_EQ(secrets->For("api.test", 443)[0].value, "second-secret");
  EXPECT_EQ(secrets->For("other.test", 443).size(), 1u);
  // Overwritten in place, same size: the modification time tells.
  { std::ofstream(path_) << "api.test X-Key: second-secreT\nother.test X-Key: third-secret\n"; }
  struct stat st {};
  ::stat(path_.c_str(), &st);
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  times[1].tv_nsec = (times[1].tv_nsec + 1) % 1000000000;
  ::utimensat(AT_FDCWD, path_.c_str(), times, 0);
  EXPECT_EQ(secrets->For("api.test", 443)[0].value, "second-secreT");
  Write("api.test X-Key: short\n");  // bad: the last good version stays
  EXPECT_EQ(secrets->For("api.test", 443)[0].value, "second-secreT");
  ::unlink(path_.c_str());  // gone: likewise
  EXPECT_EQ(secrets->For("other.test", 443).size(), 1u);
  Write("api.test X-Key: fourth-secret\n");
  EXPECT_EQ(secrets->For("api.test", 443)[0].value, "fourth-secret");
  EXPECT_TRUE(secrets->For("other.test", 443).empty());
}

TEST_F(EgressSecretsFileTest, OpeningABadFileNamesTheFileAndTheLine) {
  Write("# first\napi.test X-Key first-secret\n");
  auto opened = EgressSecrets::Open(path_);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().message(),
            path_ + " line 2: expected a header name and ':' after the destination");
  EXPECT_FALSE(EgressSecrets::Open(dir_ + "/absent").ok());
}

}  // namespace
}  // namespace ci::daemon
