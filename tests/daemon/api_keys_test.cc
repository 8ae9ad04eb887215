// API keys (daemon/auth/api_keys.h): the file's format, the Authorization header, and the file
// re-read when it changes, on a real file with a clock the test moves.
#include "daemon/auth/api_keys.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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
      {"# c\nalice " + key + " extra\n", "line 2: expected NAME and KEY"},
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
