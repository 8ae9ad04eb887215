// Safe workspace file creation and walking, on a temp directory.
#include "runtime/init/fs_util.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "runtime/kernel/unique_fd.h"

namespace ci::runtime {
namespace {

namespace fs = std::filesystem;

TEST(SafePath, AcceptsRelativeRejectsEscapes) {
  EXPECT_TRUE(IsSafeRelativePath("a/b.txt"));
  EXPECT_TRUE(IsSafeRelativePath(".env"));
  for (const char* bad : {"", "/etc/passwd", "a//b", "../x", "a/../b", "a/./b", "a/"}) {
    EXPECT_FALSE(IsSafeRelativePath(bad)) << bad;
  }
}

class FsUtilTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ci-fsutil-test-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    dir_.reset(::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
  UniqueFd dir_;
};

TEST_F(FsUtilTest, CreatesParentsAndRefusesSymlinkedDirs) {
  int fd = -1;
  ASSERT_TRUE(CreateFileBelow(dir_.get(), "data/in/x.csv", &fd).ok());
  UniqueFd f(fd);
  struct stat st {};
  ASSERT_EQ(::stat((root_ / "data/in/x.csv").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);

  fs::create_directory_symlink("/etc", root_ / "evil");
  SysError e = CreateFileBelow(dir_.get(), "evil/passwd2", &fd);
  EXPECT_FALSE(e.ok());
  EXPECT_FALSE(fs::exists("/etc/passwd2"));
  EXPECT_FALSE(CreateFileBelow(dir_.get(), "data/in/x.csv", &fd).ok());  // O_EXCL
}

TEST_F(FsUtilTest, WalkSeesRegularFilesOnly) {
  fs::create_directories(root_ / "a/b");
  std::ofstream(root_ / "a/b/c.txt") << "ccc";
  std::ofstream(root_ / ".env") << "K=V";
  fs::create_symlink("/etc/passwd", root_ / "link");
  fs::create_directory_symlink("/etc", root_ / "dirlink");
  ::mkfifo((root_ / "fifo").c_str(), 0644);
  std::map<std::string, uint64_t> seen;
  ASSERT_TRUE(WalkRegularFiles(dir_.get(), [&](const std::string& p, int, uint64_t size) {
                seen[p] = size;
                return true;
              }).ok());
  EXPECT_THAT(seen, testing::UnorderedElementsAre(testing::Pair("a/b/c.txt", 3u),
                                                  testing::Pair(".env", 3u)));
}

TEST_F(FsUtilTest, WalkSaysWhenItLeftADeepDirectoryOut) {
  fs::path deep = root_;
  for (int i = 0; i < kMaxWalkDepth + 5; ++i) deep /= "d";
  fs::create_directories(deep);
  std::ofstream(deep / "deep.txt") << "x";
  std::ofstream(root_ / "top.txt") << "t";
  std::map<std::string, uint64_t> seen;
  auto visit = [&](const std::string& p, int, uint64_t size) {
    seen[p] = size;
    return true;
  };
  bool pruned = false;
  ASSERT_TRUE(WalkRegularFiles(dir_.get(), visit, &pruned).ok());
  EXPECT_TRUE(pruned) << "a directory below the depth limit was left out silently";
  EXPECT_EQ(seen.count("top.txt"), 1u);
  // Within the limit nothing is pruned.
  fs::remove_all(root_ / "d");
  fs::create_directories(root_ / "a/b");
  pruned = false;
  ASSERT_TRUE(WalkRegularFiles(dir_.get(), visit, &pruned).ok());
  EXPECT_FALSE(pruned);
}

}  // namespace
}  // namespace ci::runtime
