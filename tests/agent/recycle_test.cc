// The recycle's pieces that are safe to run in the test's own process (src/agent/recycle.h):
// the wipe of a writable place, the System V IPC sweep (in an IPC namespace of its own), and the
// check for writable mounts nobody wipes. The kill of everything is only ever run by the agent
// as PID 1 (agent_test.cc, and the docker suites in a real container).
#include "agent/recycle.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace ci::agent {
namespace {

namespace fs = std::filesystem;

class WipeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/agent-wipe-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    root_ = base_ + "/root";
    outside_ = base_ + "/outside";
    fs::create_directories(root_);
    ::chmod(root_.c_str(), 0755);
    std::ofstream(outside_) << "keep me";
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(base_, fs::perms::all, ec);
    fs::remove_all(base_, ec);
  }
  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories(fs::path(root_ + "/" + rel).parent_path());
    std::ofstream(root_ + "/" + rel) << text;
  }
  std::vector<WipeRoot> Roots() {
    std::string error;
    auto roots = RecordRoots({root_, base_ + "/not-there"}, &error);
    EXPECT_EQ(error, "");
    EXPECT_EQ(roots.size(), 1u) << "a missing place is no place to wipe";
    return roots;
  }

  std::string base_, root_, outside_;
};

TEST_F(WipeTest, EverythingBelowTheRootGoesAndTheRootIsAsItWas) {
  auto roots = Roots();
  Write("a.txt", "x");
  Write(".hidden", "x");
  Write("d/e/f/g.bin", std::string(100000, 'z'));
  ASSERT_EQ(::mkfifo((root_ + "/fifo").c_str(), 0600), 0);
  fs::create_directories(root_ + "/locked/inner");
  Write("locked/inner/f", "x");
  ::chmod((root_ + "/locked/inner").c_str(), 0);
  ::chmod((root_ + "/locked").c_str(), 0);
  ::chmod(root_.c_str(), 0700);  // the program changed its workspace's mode
  std::string error;
  ASSERT_TRUE(WipeRoots(roots, &error)) << error;
  EXPECT_TRUE(fs::is_empty(root_));
  struct stat st {};
  ASSERT_EQ(::stat(root_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
}

TEST_F(WipeTest, SymlinksAreRemovedNeverFollowed) {
  auto roots = Roots();
  fs::create_symlink(outside_, root_ + "/to-file");
  fs::create_symlink(base_, root_ + "/to-dir");
  std::string error;
  ASSERT_TRUE(WipeRoots(roots, &error)) << error;
  EXPECT_TRUE(fs::is_empty(root_));
  std::ifstream in(outside_);
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "keep me");
}

TEST_F(WipeTest, AnAbsurdlyDeepTreeIsARefusalNotACrash) {
  auto roots = Roots();
  std::string dir = root_;
  // Built with relative mkdirs: the full path soon exceeds PATH_MAX.
  int fd = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY);
  for (int i = 0; i < 300; ++i) {
    ASSERT_EQ(::mkdirat(fd, "d", 0755), 0);
    int next = ::openat(fd, "d", O_RDONLY | O_DIRECTORY);
    ::close(fd);
    fd = next;
  }
  ::close(fd);
  std::string error;
  EXPECT_FALSE(WipeRoots(roots, &error));
  EXPECT_NE(error.find("nested deeper"), std::string::npos) << error;
}

TEST_F(WipeTest, ExtendedAttributesOfTheRootGo) {
  auto roots = Roots();
  if (::setxattr(root_.c_str(), "user.mark", "1", 1, 0) != 0) {
    GTEST_SKIP() << "no user xattrs on this file system";
  }
  std::string error;
  ASSERT_TRUE(WipeRoots(roots, &error)) << error;
  char value[8];
  EXPECT_LT(::getxattr(root_.c_str(), "user.mark", value, sizeof value), 0);
}

TEST(SysvIpcTest, EveryObjectOfTheNamespaceIsRemoved) {
  if (::geteuid() != 0) GTEST_SKIP() << "an IPC namespace of its own needs root";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::unshare(CLONE_NEWIPC) != 0) ::_exit(10);
    if (::shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600) < 0) ::_exit(11);
    if (::shmget(0x1234, 4096, IPC_CREAT | 0) < 0) ::_exit(12);  // no permissions at all
    if (::semget(IPC_PRIVATE, 3, IPC_CREAT | 0600) < 0) ::_exit(13);
    if (::msgget(IPC_PRIVATE, IPC_CREAT | 0600) < 0) ::_exit(14);
    std::string error;
    if (!RemoveSysvIpc(&error)) ::_exit(15);
    for (const char* t : {"/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg"}) {
      std::ifstream in(t);
      std::string header, row;
      std::getline(in, header);
      if (std::getline(in, row)) ::_exit(16);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(UncoveredMountsTest, AWritableRootIsNeverCovered) {
  struct statvfs st {};
  ASSERT_EQ(::statvfs("/", &st), 0);
  auto uncovered = UncoveredWritableMounts({});
  bool root_listed = std::find(uncovered.begin(), uncovered.end(), "/") != uncovered.end();
  EXPECT_EQ(root_listed, (st.f_flag & ST_RDONLY) == 0);
}

}  // namespace
}  // namespace ci::agent
