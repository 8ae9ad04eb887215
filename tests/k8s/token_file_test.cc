#include "k8s/token_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <string>

#include "scratch_dir.h"

namespace ci::k8s {
namespace {

using std::chrono::seconds;
using std::chrono::steady_clock;

// A token file and a clock the test moves by hand, so "a minute later" needs no sleep.
class TokenFileTest : public ::testing::Test {
 protected:
  TokenFile Make() {
    return TokenFile(dir_.Path("token"), [this] { return now_; });
  }
  std::string TokenOf(TokenFile& f) {
    auto t = f.Token();
    EXPECT_TRUE(t.ok()) << t.status().message();
    return t.ok() ? *t : "";
  }
  // Rewrites the token in place (same inode; the tests keep the size) with the mtime it had
  // plus `shift`: 0 is a rewrite within the mtime's granularity, which stat cannot see.
  void RewriteInPlace(const std::string& text, long shift) {
    struct stat st;
    ASSERT_EQ(::stat(dir_.Path("token").c_str(), &st), 0);
    dir_.Write("token", text);
    timespec t = st.st_mtim;
    t.tv_sec += shift;
    timespec times[2] = {t, t};
    ASSERT_EQ(::utimensat(AT_FDCWD, dir_.Path("token").c_str(), times, 0), 0);
  }

  ScratchDir dir_;
  steady_clock::time_point now_ = steady_clock::time_point() + std::chrono::hours(1);
};

TEST_F(TokenFileTest, ReadsTheTokenTrimmed) {
  dir_.Write("token", "  eyJhbGciOi.abc.def\n\n");
  TokenFile f = Make();
  EXPECT_EQ(TokenOf(f), "eyJhbGciOi.abc.def");
}

TEST_F(TokenFileTest, ARotatedFileIsReadAtOnce) {
  dir_.Write("token", "first");
  TokenFile f = Make();
  EXPECT_EQ(TokenOf(f), "first");
  dir_.Replace("token", "second");  // a new inode, as the kubelet's atomic writer makes
  EXPECT_EQ(TokenOf(f), "second");
}

TEST_F(TokenFileTest, AnInPlaceRewriteIsSeenByItsMtime) {
  dir_.Write("token", "tok-A");
  TokenFile f = Make();
  EXPECT_EQ(TokenOf(f), "tok-A");
  RewriteInPlace("tok-B", 10);
  EXPECT_EQ(TokenOf(f), "tok-B");
}

TEST_F(TokenFileTest, AnUnchangedLookingFileIsReadAgainAfterAMinute) {
  dir_.Write("token", "tok-A");
  TokenFile f = Make();
  EXPECT_EQ(TokenOf(f), "tok-A");
  RewriteInPlace("tok-B", 0);  // nothing for stat to see
  now_ += seconds(59);
  EXPECT_EQ(TokenOf(f), "tok-A");  // cached: not read on every request
  now_ += seconds(1);
  EXPECT_EQ(TokenOf(f), "tok-B");
}

TEST_F(TokenFileTest, AVanishedFileKeepsTheLastToken) {
  dir_.Write("token", "still-valid");
  TokenFile f = Make();
  EXPECT_EQ(TokenOf(f), "still-valid");
  std::filesystem::remove(dir_.Path("token"));
  now_ += seconds(120);
  EXPECT_EQ(TokenOf(f), "still-valid");
  dir_.Write("token", "back");
  EXPECT_EQ(TokenOf(f), "back");
}

TEST_F(TokenFileTest, AMissingOrEmptyFileIsAnErrorNamingIt) {
  TokenFile missing = Make();
  auto t = missing.Token();
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "bearer token: reading " + dir_.Path("token") + ": No such file or directory");
  dir_.Write("token", " \n");
  TokenFile empty = Make();
  t = empty.Token();
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "bearer token: " + dir_.Path("token") + " is empty");
}

}  // namespace
}  // namespace ci::k8s
