// The cgroup implementations against a temp directory laid out like cgroupfs.
#include "runtime/cgroups.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace ci {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Put(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/ci-cgroup-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// cgroupfs removes a directory with its control files; a plain directory needs them gone first.
void EmptyDir(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir)) fs::remove(e.path());
}

TEST(CgroupV1, CreateWritesLimitsAndSwapZero) {
  TempDir root;
  for (const char* c : {"memory", "pids", "cpuacct"}) fs::create_directories(root.path() / c);
  Put(root.path() / "memory/memory.limit_in_bytes", "");
  Put(root.path() / "memory/memory.memsw.limit_in_bytes", "");

  auto cg = MakeCgroupV1(root.path(), "abc");
  ASSERT_TRUE(cg->Create({128u << 20, 16}).ok());
  const fs::path mem = root.path() / "memory/code-interpreter/abc";
  EXPECT_EQ(Slurp(mem / "memory.limit_in_bytes"), "134217728");
  EXPECT_EQ(Slurp(mem / "memory.memsw.limit_in_bytes"), "134217728");
  EXPECT_EQ(Slurp(mem / "memory.swappiness"), "0");
  EXPECT_EQ(Slurp(root.path() / "pids/code-interpreter/abc/pids.max"), "16");
  EXPECT_TRUE(fs::is_directory(root.path() / "cpuacct/code-interpreter/abc"));

  ASSERT_TRUE(cg->AddProcess(4242).ok());
  EXPECT_EQ(Slurp(mem / "cgroup.procs"), "4242");
  EXPECT_EQ(Slurp(root.path() / "pids/code-interpreter/abc/cgroup.procs"), "4242");

  Put(mem / "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
  Put(mem / "memory.max_usage_in_bytes", "1000\n");
  Put(root.path() / "pids/code-interpreter/abc/pids.events", "max 3\n");
  Put(root.path() / "cpuacct/code-interpreter/abc/cpuacct.usage", "2500000000\n");
  CgroupStats s = cg->ReadStats();
  EXPECT_TRUE(s.oom_killed);
  EXPECT_TRUE(s.pids_limit_hit);
  EXPECT_EQ(s.memory_peak_bytes, 1000u);
  EXPECT_EQ(s.cpu_ms, 2500u);

  for (const char* c : {"memory", "pids", "cpuacct"}) {
    EmptyDir(root.path() / c / "code-interpreter/abc");
  }
  EXPECT_TRUE(cg->Remove().ok());
  EXPECT_FALSE(fs::exists(mem));
  EXPECT_TRUE(fs::exists(root.path() / "memory/code-interpreter"));  // shared parent stays
}

TEST(CgroupV1, NoMemswWithoutSwapAccounting) {
  TempDir root;
  for (const char* c : {"memory", "pids"}) fs::create_directories(root.path() / c);
  auto cg = MakeCgroupV1(root.path(), "x");
  ASSERT_TRUE(cg->Create({64u << 20, 8}).ok());
  EXPECT_FALSE(fs::exists(root.path() / "memory/code-interpreter/x/memory.memsw.limit_in_bytes"));
  CgroupStats s = cg->ReadStats();
  EXPECT_FALSE(s.oom_killed);
  EXPECT_FALSE(s.pids_limit_hit);
  EXPECT_EQ(s.cpu_ms, 0u);
}

TEST(CgroupV1, CreateFailsWithContextWhenNameTaken) {
  TempDir root;
  for (const char* c : {"memory", "pids"}) {
    fs::create_directories(root.path() / c / "code-interpreter/dup");
  }
  auto cg = MakeCgroupV1(root.path(), "dup");
  SysError e = cg->Create({64u << 20, 8});
  EXPECT_EQ(e.err, EEXIST);
  EXPECT_THAT(e.what, testing::HasSubstr("mkdir"));
  EXPECT_TRUE(cg->Remove().ok());  // removes nothing it did not create
  EXPECT_TRUE(fs::exists(root.path() / "memory/code-interpreter/dup"));
}

TEST(CgroupV2, CreateEnablesControllersAndWritesLimits) {
  TempDir root;
  Put(root.path() / "cgroup.controllers", "cpuset cpu io memory pids\n");
  Put(root.path() / "memory.swap.max", "");
  auto cg = MakeCgroupV2(root.path(), "abc");
  ASSERT_TRUE(cg->Create({128u << 20, 16}).ok());
  const fs::path dir = root.path() / "code-interpreter/abc";
  EXPECT_EQ(Slurp(root.path() / "cgroup.subtree_control"), "+memory +pids");
  EXPECT_EQ(Slurp(root.path() / "code-interpreter/cgroup.subtree_control"), "+memory +pids");
  EXPECT_EQ(Slurp(dir / "memory.max"), "134217728");
  EXPECT_EQ(Slurp(dir / "memory.swap.max"), "0");
  EXPECT_EQ(Slurp(dir / "pids.max"), "16");
  ASSERT_TRUE(cg->AddProcess(77).ok());
  EXPECT_EQ(Slurp(dir / "cgroup.procs"), "77");

  Put(dir / "memory.events", "low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\n");
  Put(dir / "pids.events", "max 0\n");
  Put(dir / "memory.peak", "4096\n");
  Put(dir / "cpu.stat", "usage_usec 1500000\nuser_usec 1000000\n");
  CgroupStats s = cg->ReadStats();
  EXPECT_TRUE(s.oom_killed);
  EXPECT_FALSE(s.pids_limit_hit);
  EXPECT_EQ(s.memory_peak_bytes, 4096u);
  EXPECT_EQ(s.cpu_ms, 1500u);

  EmptyDir(dir);
  EXPECT_TRUE(cg->Remove().ok());
  EXPECT_FALSE(fs::exists(dir));
}

TEST(CgroupDetect, ClassifiesConfiguredRoots) {
  TempDir v2, v1, none;
  Put(v2.path() / "cgroup.controllers", "memory pids\n");
  fs::create_directories(v1.path() / "memory");
  fs::create_directories(v1.path() / "pids");
  Put(v1.path() / "memory/memory.limit_in_bytes", "");
  CgroupLayout layout;
  std::string why;
  ASSERT_TRUE(DetectCgroups(v2.path(), &layout, &why));
  EXPECT_EQ(layout.version, 2);
  ASSERT_TRUE(DetectCgroups(v1.path(), &layout, &why));
  EXPECT_EQ(layout.version, 1);
  EXPECT_EQ(layout.root, v1.path().string());
  EXPECT_FALSE(DetectCgroups(none.path(), &layout, &why));
  EXPECT_THAT(why, testing::HasSubstr("no usable cgroup controllers"));
}

TEST(CgroupDetect, V2WithoutPidsFallsBack) {
  TempDir root;
  Put(root.path() / "cgroup.controllers", "memory\n");
  CgroupLayout layout;
  std::string why;
  EXPECT_FALSE(DetectCgroups(root.path(), &layout, &why));
}

TEST(CgroupName, IsSixteenHexDigitsAndRandom) {
  std::string a = RandomCgroupName(), b = RandomCgroupName();
  EXPECT_THAT(a, testing::MatchesRegex("[0-9a-f]{16}"));
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace ci
