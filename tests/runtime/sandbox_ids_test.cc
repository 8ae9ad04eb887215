// Claiming sandbox ids, reading subordinate ids and the cgroup reaper, on temp directories.
#include "runtime/kernel/sandbox_ids.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runtime/daemon/cgroup_reaper.h"
#include "runtime/kernel/cgroups.h"

namespace ci::runtime {
namespace {

namespace fs = std::filesystem;

class TempDir : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ci-ids-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(TempDir, ClaimsTheLowestFreeIndexUntilReleased) {
  uint32_t a = 99, b = 99, c = 99;
  UniqueFd la, lb, lc;
  ASSERT_TRUE(ClaimIdIndex(dir_, 3, &a, &la).ok());
  ASSERT_TRUE(ClaimIdIndex(dir_, 3, &b, &lb).ok());
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 1u);
  la.reset();  // a sandbox ended: its index is free again
  ASSERT_TRUE(ClaimIdIndex(dir_, 3, &c, &lc).ok());
  EXPECT_EQ(c, 0u);
  UniqueFd ld, le;
  uint32_t d = 99, e = 99;
  ASSERT_TRUE(ClaimIdIndex(dir_, 3, &d, &ld).ok());
  EXPECT_EQ(d, 2u);
  SysError full = ClaimIdIndex(dir_, 3, &e, &le);
  EXPECT_EQ(full.err, ENOSPC);
  EXPECT_NE(full.what.find("SANDBOX_ID_RANGE"), std::string::npos) << full.what;
}

TEST_F(TempDir, ClaimsAreSharedAcrossProcesses) {
  uint32_t mine = 99;
  UniqueFd lock;
  ASSERT_TRUE(ClaimIdIndex(dir_, 4, &mine, &lock).ok());
  pid_t child = ::fork();
  if (child == 0) {  // another daemon's shim: separate open file descriptions
    uint32_t other = 99;
    UniqueFd l;
    ::_exit(ClaimIdIndex(dir_, 4, &other, &l).ok() && other == 1 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST_F(TempDir, LockDirMustBeOwnedAndPrivate) {
  const std::string dir = dir_ + "/a/ids";
  ASSERT_TRUE(PrepareIdLockDir(dir).ok());
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  SysError e = PrepareIdLockDir(dir);
  EXPECT_FALSE(e.ok());
  EXPECT_NE(e.what.find("only it may write"), std::string::npos) << e.what;
}

TEST_F(TempDir, SubordinateIdsOfOneUser) {
  const std::string file = dir_ + "/subuid";
  std::ofstream(file) << "alice:100000:65536\nbad line\n1000:300000:10\nbob:0:5\nbob:200000:0\n"
                      << "carol:400000:1000\n";
  IdRange alice = SubordinateIds(file, "alice", 999);
  EXPECT_EQ(alice.first, 100000u);
  EXPECT_EQ(alice.count, 65536u);
  IdRange by_uid = SubordinateIds(file, "nosuchname", 1000);
  EXPECT_EQ(by_uid.first, 300000u);
  EXPECT_EQ(by_uid.count, 10u);
  EXPECT_TRUE(SubordinateIds(file, "bob", 5).empty());  // zero first or count are not ranges
  EXPECT_TRUE(SubordinateIds(file, "dave", 6).empty());
  EXPECT_TRUE(SubordinateIds(dir_ + "/missing", "alice", 999).empty());
}

TEST_F(TempDir, ReaperRemovesOnlyCgroupsOfDeadShims) {
  const std::string parent = dir_ + "/memory/" + kCgroupParent;
  fs::create_directories(parent);
  fs::create_directories(dir_ + "/pids/" + kCgroupParent);
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string hex = "0123456789abcdef";
  const std::string orphan = std::to_string(dead) + "-" + hex;
  // Our own pid is alive but no shim (its cmdline says so): a reused pid, the cgroup is orphaned.
  const std::string reused = std::to_string(::getpid()) + "-" + hex;
  for (const std::string& name :
       {orphan, reused, std::string("fedcba9876543210"), std::string("someone-elses"),
        std::string("12-short"), std::string("daemon")}) {
    fs::create_directory(parent + "/" + name);
  }
  fs::create_directory(dir_ + "/pids/" + kCgroupParent + "/" + orphan);
  std::vector<std::string> failures;
  std::vector<std::string> removed = ReapOrphanCgroups({1, dir_}, &failures);
  EXPECT_TRUE(failures.empty());
  EXPECT_EQ(removed.size(), 4u);
  EXPECT_FALSE(fs::exists(parent + "/" + orphan));
  EXPECT_FALSE(fs::exists(dir_ + "/pids/" + kCgroupParent + "/" + orphan));
  EXPECT_FALSE(fs::exists(parent + "/" + reused));
  EXPECT_FALSE(fs::exists(parent + "/fedcba9876543210"));  // the older format, empty
  EXPECT_TRUE(fs::exists(parent + "/someone-elses"));
  EXPECT_TRUE(fs::exists(parent + "/12-short"));
  EXPECT_TRUE(fs::exists(parent + "/daemon"));
}

}  // namespace
}  // namespace ci::runtime
