// API keys (daemon/auth/api_keys.h): the file's format, the Authorization header, and the file
// re-read when it changes, on a real file with a clock the test moves.
#include "daemon/auth/api_keys.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "daemon/auth/key_quotas.h"
#include "daemon/service/sandbox_egress.h"

namespace ci::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kAliceKey = "alice-0123456789abcdef";
constexpr const char* kBobKey = "bob-fedcba9876543210xyz";

std::vector<std::string> Names(const std::vector<ApiKey>& keys) {
  std::vector<std::string> out;
  for (const auto& k : keys) out.push_back(k.name);
  return out;
}

TEST(ParseApiKeys, NamesAndKeysWithCommentsAndBlankLines) {
  auto keys = ParseApiKeys(std::string("# team keys\n\nalice ") + kAliceKey +
                           "   # laptop\n\tbob\t" + kBobKey + "\n   \n");
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  EXPECT_EQ(Names(*keys), (std::vector<std::string>{"alice", "bob"}));
  auto none = ParseApiKeys("# nobody yet\n");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(ParseApiKeys, EachMistakeNamesItsLineAndNeverTheKey) {
  const std::string key = "s3cr3t-0123456789abcdef";
  struct Case {
    std::string text;
    std::string says;
  } cases[] = {
      {"alice\n", "line 1: expected NAME and KEY"},
      {"# c\nalice " + key + " extra\n", "line 2: the limits of alice: a field after the key"},
      {"alice " + key + " " + key + "\n", "line 1: the limits of alice: a field after the key"},
      {"alice " + key + " sessions=two\n", "sessions= needs a whole number from 0"},
      {"alice " + key + " files_mb=-1\n", "files_mb= needs a whole number"},
      {"alice " + key + " executions=1000000000\n", "executions= needs a whole number"},
      {"alice " + key + " mcp_sessions=0\n", "mcp_sessions= needs a whole number from 1"},
      {"alice " + key + " model_calls=1 model_calls=2\n", "model_calls is given twice"},
      {"alice " + key + " egress=\n", "egress= needs rules, or none"},
      {"alice " + key + " egress=*\n", "egress="},
      {"alice " + key + " egress=a.org egress=none\n", "egress is given twice"},
      {"al!ce " + key + "\n", "line 1: the NAME must be"},
      {std::string(65, 'a') + " " + key + "\n", "the NAME must be"},
      {"alice short\n", "shorter than 16 characters"},
      {"alice " + key + "\"quote\n", "a character a bearer token cannot carry"},
      {"alice " + key + "\nalice other-0123456789abcdef\n",
       "line 2: the NAME alice is given twice"},
      {"alice " + key + "\nbob " + key + "\n", "line 2: the key of bob is another name's key too"},
  };
  for (const auto& c : cases) {
    auto keys = ParseApiKeys(c.text);
    ASSERT_FALSE(keys.ok()) << c.text;
    EXPECT_THAT(keys.status().message(), HasSubstr(c.says)) << c.text;
    EXPECT_THAT(keys.status().message(), Not(HasSubstr("s3cr3t"))) << "a key in an error";
  }
}

TEST(ParseApiKeys, LimitsAfterTheKeyAreTheKeysOwn) {
  auto keys = ParseApiKeys(std::string("alice ") + kAliceKey +
                           " sessions=3 executions=0 files_mb=512 mcp_sessions=7 model_calls=1\n" +
                           "bob " + kBobKey + "\n");
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  const KeyLimits& a = (*keys)[0].limits;
  EXPECT_EQ(a.sessions, 3u);
  EXPECT_EQ(a.executions, 0u);
  EXPECT_EQ(a.files_mb, 512u);
  EXPECT_EQ(a.mcp_sessions, 7u);
  EXPECT_EQ(a.model_calls, 1u);
  const KeyLimits& b = (*keys)[1].limits;
  EXPECT_FALSE(b.sessions || b.executions || b.files_mb || b.mcp_sessions || b.model_calls ||
               b.egress);
}

// egress=: the key's own rules (its default and its bound), or none; checked against
// EGRESS_ALLOW_MAX where they are used (BoundsFor), never widening it.
TEST(ParseApiKeys, EgressRulesAreTheKeysOwnBound) {
  auto keys =
      ParseApiKeys(std::string("alice ") + kAliceKey + " egress=pypi.org,*.pythonhosted.org\n" +
                   "bob " + kBobKey + " egress=none\n");
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  ASSERT_TRUE((*keys)[0].limits.egress.has_value());
  Config c;
  c.egress_max.allow = ParseEgressRules("pypi.org, *.pythonhosted.org, web.test", "").value();
  c.egress_default = c.egress_max;
  auto alice = BoundsFor(c, (*keys)[0].limits.egress);
  ASSERT_TRUE(alice.ok()) << alice.status().message();
  EXPECT_EQ(alice->max.ToString(), "pypi.org,*.pythonhosted.org");
  EXPECT_EQ(alice->fallback.ToString(), "pypi.org,*.pythonhosted.org");
  auto bob = BoundsFor(c, (*keys)[1].limits.egress);
  ASSERT_TRUE(bob.ok());
  EXPECT_TRUE(bob->max.none());
  EXPECT_EQ(BoundsFor(c, std::nullopt)->max.ToString(), c.egress_max.ToString());
  // A key's line may not widen the daemon's bound.
  auto wider = BoundsFor(c, ParseEgressRules("evil.org", "").value());
  ASSERT_FALSE(wider.ok());
  EXPECT_THAT(wider.status().message(), HasSubstr("'evil.org' is not within"));
}

// A key's share: its own limits (never above the replica's), else the defaults, which leave
// room for other keys; without keys ("") the one client has the whole replica.
TEST(KeyQuotas, OwnLimitsDefaultsAndTheWholeReplica) {
  Config c;
  c.max_sessions = 64;
  c.max_concurrent_executions = 16;
  c.file_storage_max_mb = 1000;
  c.max_mcp_sessions = 1000;
  c.max_concurrent_model_calls = 8;
  KeyQuotas quotas(c);
  Quota whole = quotas.For("");
  EXPECT_EQ(whole.sessions, 64u);
  EXPECT_EQ(whole.executions, 16u);
  EXPECT_EQ(whole.file_bytes, UINT64_MAX);
  EXPECT_EQ(whole.model_calls, 8u);
  Quota d = quotas.For("bob");
  EXPECT_EQ(d.sessions, 32u);
  EXPECT_EQ(d.executions, 12u);
  EXPECT_EQ(d.file_bytes, 500ull << 20);
  EXPECT_EQ(d.mcp_sessions, 500u);
  EXPECT_EQ(d.model_calls, 4u);

  auto keys = ParseApiKeys(std::string("alice ") + kAliceKey +
                           " sessions=100 executions=0 files_mb=2000 model_calls=2\n");
  ASSERT_TRUE(keys.ok());
  quotas.Set(*keys);
  Quota a = quotas.For("alice");
  EXPECT_EQ(a.sessions, 64u) << "never above the replica's";
  EXPECT_EQ(a.executions, 0u);
  EXPECT_EQ(a.file_bytes, 2000ull << 20) << "the store's quota still applies on top";
  EXPECT_EQ(a.mcp_sessions, 500u);
  EXPECT_EQ(a.model_calls, 2u);
  EXPECT_EQ(quotas.For("bob").sessions, 32u);

  // Configured defaults; tiny replicas still give each key one.
  c.max_sessions_per_key = 5;
  c.max_executions_per_key = 3;
  c.file_storage_per_key_mb = 10;
  c.max_model_calls_per_key = 1;
  Quota set = KeyQuotas(c).For("bob");
  EXPECT_EQ(set.sessions, 5u);
  EXPECT_EQ(set.executions, 3u);
  EXPECT_EQ(set.file_bytes, 10ull << 20);
  EXPECT_EQ(set.model_calls, 1u);
  Config tiny;
  tiny.max_sessions = 1;
  tiny.max_concurrent_executions = 1;
  tiny.max_concurrent_model_calls = 1;
  Quota one = KeyQuotas(tiny).For("bob");
  EXPECT_EQ(one.sessions, 1u);
  EXPECT_EQ(one.executions, 1u);
  EXPECT_EQ(one.model_calls, 1u);
}

class ApiKeysFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/api-keys-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/keys";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Written whole under another name and renamed into place, as an editor or a Secret does.
  void Write(const std::string& text) {
    {
      std::ofstream out(path_ + ".new");
      out << text;
    }
    ASSERT_EQ(rename((path_ + ".new").c_str(), path_.c_str()), 0);
  }
  std::unique_ptr<ApiKeys> Open() {
    auto keys = ApiKeys::Open(path_, [this] { return now_; });
    EXPECT_TRUE(keys.ok()) << keys.status().message();
    return keys.ok() ? std::move(keys).value() : nullptr;
  }
  std::string Bearer(const char* key) { return std::string("Bearer ") + key; }
  void Later() { now_ += std::chrono::seconds(2); }

  std::string dir_, path_;
  std::chrono::steady_clock::time_point now_{};
};

TEST_F(ApiKeysFileTest, TheHeaderNamesTheCaller) {
  Write(std::string("alice ") + kAliceKey + "\nbob " + kBobKey + "\n");
  auto keys = Open();
  ASSERT_TRUE(keys);
  EXPECT_EQ(keys->count(), 2u);
  EXPECT_EQ(keys->Authenticate(Bearer(kAliceKey)).name, "alice");
  EXPECT_EQ(keys->Authenticate(std::string("bearer  ") + kBobKey + " ").name, "bob");

  Caller missing = keys->Authenticate(std::nullopt);
  EXPECT_FALSE(missing.ok());
  EXPECT_FALSE(missing.wrong_key);
  EXPECT_THAT(missing.error, HasSubstr("Missing API key"));
  Caller basic = keys->Authenticate(std::string("Basic ") + kAliceKey);
  EXPECT_FALSE(basic.ok());
  EXPECT_THAT(basic.error, HasSubstr("Bearer"));
  for (const std::string& wrong :
       {Bearer("alice-0123456789abcdeX"), Bearer("alice-0123456789abcde"), std::string("Bearer "),
        Bearer(kAliceKey) + "x", Bearer("bob")}) {
    Caller c = keys->Authenticate(wrong);
    EXPECT_FALSE(c.ok()) << wrong;
    EXPECT_EQ(c.name, "");
  }
  EXPECT_TRUE(keys->Authenticate(Bearer("nope-0123456789abcdef")).wrong_key);
}

TEST_F(ApiKeysFileTest, AFileWithoutKeysOrMissingStopsStartup) {
  auto missing = ApiKeys::Open(path_);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr(path_));
  Write("# nobody\n");
  auto empty = ApiKeys::Open(path_);
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("has no key"));
  Write("alice short\n");
  EXPECT_FALSE(ApiKeys::Open(path_).ok());
}

TEST_F(ApiKeysFileTest, ChangesAreReadWithoutARestart) {
  Write(std::string("alice ") + kAliceKey + "\n");
  auto keys = Open();
  ASSERT_TRUE(keys);
  EXPECT_FALSE(keys->Authenticate(Bearer(kBobKey)).ok());

  // Bob added, Alice revoked: seen once the clock has moved past the re-read pace.
  Write(std::string("bob ") + kBobKey + "\n");
  EXPECT_EQ(keys->Authenticate(Bearer(kAliceKey)).name, "alice") << "not looked at yet";
  Later();
  EXPECT_EQ(keys->Authenticate(Bearer(kBobKey)).name, "bob");
  EXPECT_FALSE(keys->Authenticate(Bearer(kAliceKey)).ok());

  // An edit that does not parse keeps what was read before.
  Write(std::string("bob ") + kBobKey + "\ncarol tiny\n");
  Later();
  EXPECT_EQ(keys->Authenticate(Bearer(kBobKey)).name, "bob");

  // The limits on the lines follow every re-read.
  std::vector<std::string> seen;
  keys->OnLoad([&seen](const std::vector<ApiKey>& k) {
    seen.push_back(k.empty() || !k[0].limits.sessions ? "-"
                                                      : std::to_string(*k[0].limits.sessions));
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"-"})) << "called at once with the keys read";
  Write(std::string("bob ") + kBobKey + " sessions=2\n");
  Later();
  EXPECT_TRUE(keys->Authenticate(Bearer(kBobKey)).ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"-", "2"}));

  // No file: no key is accepted; back: accepted again.
  ASSERT_EQ(unlink(path_.c_str()), 0);
  Later();
  EXPECT_FALSE(keys->Authenticate(Bearer(kBobKey)).ok());
  Write(std::string("bob ") + kBobKey + "\n");
  Later();
  EXPECT_EQ(keys->Authenticate(Bearer(kBobKey)).name, "bob");
}

}  // namespace
}  // namespace ci::daemon
