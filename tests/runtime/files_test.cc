// Staging files into /workspace and collecting them back.
#include <gmock/gmock.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "sandbox_fixture.h"

namespace ci::testing_support {
namespace {

namespace fs = std::filesystem;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

class FilesTest : public SandboxTest {
 protected:
  void SetUp() override {
    SandboxTest::SetUp();
    char tmpl[] = "/tmp/ci-files-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    fs::create_directory(dir_ / "src");
    fs::create_directory(dir_ / "out");
  }
  void TearDown() override {
    SandboxTest::TearDown();
    fs::remove_all(dir_);
  }

  StagedFile Stage(const std::string& workspace_path, const std::string& content) {
    fs::path p = dir_ / "src" / std::to_string(staged_++);
    std::ofstream(p) << content;
    return {workspace_path, p};
  }
  static std::map<std::string, std::string> Contents(const Collection& c) {
    std::map<std::string, std::string> out;
    for (const auto& f : c.files) {
      std::ifstream in(f.host_path);
      std::stringstream ss;
      ss << in.rdbuf();
      out[f.workspace_path] = ss.str();
    }
    return out;
  }

  fs::path dir_;
  int staged_ = 0;
};

TEST_F(FilesTest, StagedFilesAreVisibleAndOutputsCollected) {
  RunPayload p = Shell(
      "cat data/in.csv a.txt; mkdir -p out/deep && echo result > out/deep/r.txt; "
      "echo SECRET=1 > .env; ln -s /etc/passwd link; mkfifo pipe; ls -l data/in.csv");
  p.files = {Stage("a.txt", "A\n"), Stage("data/in.csv", "x,y\n"),
             Stage("__main__.py", "print(1)\n")};
  CollectLimits limits;
  limits.dest_dir = dir_ / "out";
  Execution ex = Execute(DefaultSpec(), std::move(p), limits);
  ASSERT_TRUE(ex.outcome && ex.outcome->ok()) << ex.outcome->status().message();
  EXPECT_THAT(ex.out, ::testing::StartsWith("x,y\nA\n-rw-r--r-- 1 user user"));
  ASSERT_TRUE(ex.collection && ex.collection->ok()) << ex.collection->status().message();
  EXPECT_FALSE((*ex.collection)->truncated);
  EXPECT_THAT(Contents(**ex.collection),
              UnorderedElementsAre(Pair("a.txt", "A\n"), Pair("data/in.csv", "x,y\n"),
                                   Pair("out/deep/r.txt", "result\n"), Pair(".env", "SECRET=1\n")));
  for (const auto& f : (*ex.collection)->files) {
    EXPECT_EQ(fs::path(f.host_path).parent_path(), dir_ / "out");
    EXPECT_EQ(f.size, fs::file_size(f.host_path));
  }
}

TEST_F(FilesTest, UnsafeStagedPathIsRefused) {
  RunPayload p = Shell("echo ran");
  p.files = {Stage("../escape.txt", "x")};
  Execution ex = Execute(DefaultSpec(), std::move(p));
  ASSERT_TRUE(ex.outcome.has_value());
  ASSERT_FALSE(ex.outcome->ok());
  EXPECT_THAT(ex.outcome->status().message(), ::testing::HasSubstr("unsafe path"));
}

TEST_F(FilesTest, LimitsTruncate) {
  CollectLimits limits;
  limits.dest_dir = dir_ / "out";
  limits.max_files = 2;
  Execution ex =
      Execute(DefaultSpec(), Shell("for i in 1 2 3 4 5; do echo $i > f$i; done"), limits);
  ASSERT_TRUE(ex.collection && ex.collection->ok()) << ex.collection->status().message();
  EXPECT_TRUE((*ex.collection)->truncated);
  EXPECT_EQ((*ex.collection)->files.size(), 2u);

  limits.max_files = 100;
  limits.max_total_bytes = 1000;
  ex =
      Execute(DefaultSpec(), Shell("head -c 600 /dev/zero > a; head -c 600 /dev/zero > b"), limits);
  ASSERT_TRUE(ex.collection && ex.collection->ok());
  EXPECT_TRUE((*ex.collection)->truncated);
  EXPECT_EQ((*ex.collection)->files.size(), 1u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "out"), fs::directory_iterator()), 3);
}

}  // namespace
}  // namespace ci::testing_support
