// The cgroup implementations against a temp directory laid out like cgroupfs.
#include "runtime/kernel/cgroups.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ci::runtime {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Put(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

class ScratchRoot {
 public:
  ScratchRoot() {
    char tmpl[] = "/tmp/ci-cgroup-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~ScratchRoot() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// cgroupfs removes a directory with its control files; a plain directory needs them gone first.
void EmptyDir(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir)) fs::remove(e.path());
}

TEST(CgroupV1, CreateWritesLimitsAndSwapZero) {
  ScratchRoot root;
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

// Sandbox::Freeze's hierarchy, when mounted: best effort, a sandbox is made without it.
TEST(CgroupV1, FreezerHierarchyIsUsedWhenMountedAndThawedForTheKill) {
  ScratchRoot root;
  for (const char* c : {"memory", "pids", "freezer"}) fs::create_directories(root.path() / c);
  Put(root.path() / "freezer/cgroup.procs", "");
  auto cg = MakeCgroupV1(root.path(), "f");
  ASSERT_TRUE(cg->Create({64u << 20, 8}).ok());
  ASSERT_TRUE(cg->AddProcess(7).ok());
  const fs::path dir = root.path() / "freezer/code-interpreter/f";
  EXPECT_EQ(Slurp(dir / "cgroup.procs"), "7");
  EXPECT_THAT(cg->description(), testing::HasSubstr(",freezer:"));
  Put(dir / "cgroup.procs", "");  // the task is gone
  Put(dir / "freezer.state", "FROZEN\n");
  EXPECT_TRUE(cg->ThawForKill().ok());
  EXPECT_EQ(Slurp(dir / "freezer.state"), "THAWED");
  fs::remove(dir / "cgroup.procs");
  fs::remove(dir / "freezer.state");
  (void)cg->Remove();  // the other directories hold the files written above: not rmdir'd here
  EXPECT_FALSE(fs::exists(dir));

  // Its directory cannot be made (here: a file in the way): the sandbox still gets its cgroup.
  fs::remove(root.path() / "freezer/code-interpreter");
  Put(root.path() / "freezer/code-interpreter", "");
  auto other = MakeCgroupV1(root.path(), "g");
  ASSERT_TRUE(other->Create({64u << 20, 8}).ok());
  ASSERT_TRUE(other->AddProcess(8).ok());
  EXPECT_THAT(other->description(), testing::Not(testing::HasSubstr("freezer")));
}

TEST(CgroupV1, CpuCapWritesCfsQuotaInTheCpuHierarchy) {
  ScratchRoot root;
  for (const char* c : {"memory", "pids", "cpuacct", "cpu"})
    fs::create_directories(root.path() / c);
  Put(root.path() / "cpu/cpu.cfs_quota_us", "-1");
  auto cg = MakeCgroupV1(root.path(), "q");
  ASSERT_TRUE(cg->Create({64u << 20, 8, 150}).ok());
  const fs::path cpu = root.path() / "cpu/code-interpreter/q";
  EXPECT_EQ(Slurp(cpu / "cpu.cfs_period_us"), "100000");
  EXPECT_EQ(Slurp(cpu / "cpu.cfs_quota_us"), "150000");
  ASSERT_TRUE(cg->AddProcess(7).ok());
  EXPECT_EQ(Slurp(cpu / "cgroup.procs"), "7");
}

TEST(CgroupV1, CpuCapInACoMountedCpuCpuacctHierarchyUsesOneDirectory) {
  ScratchRoot root;
  for (const char* c : {"memory", "pids", "cpu,cpuacct"}) fs::create_directories(root.path() / c);
  fs::create_directory_symlink("cpu,cpuacct", root.path() / "cpu");
  fs::create_directory_symlink("cpu,cpuacct", root.path() / "cpuacct");
  Put(root.path() / "cpu,cpuacct/cpu.cfs_quota_us", "-1");
  auto cg = MakeCgroupV1(root.path(), "q");
  ASSERT_TRUE(cg->Create({64u << 20, 8, 50}).ok());
  EXPECT_EQ(Slurp(root.path() / "cpu,cpuacct/code-interpreter/q/cpu.cfs_quota_us"), "50000");
}

TEST(CgroupV1, CpuCapWithoutTheCpuControllerIsRefused) {
  ScratchRoot root;
  for (const char* c : {"memory", "pids"}) fs::create_directories(root.path() / c);
  auto cg = MakeCgroupV1(root.path(), "q");
  SysError e = cg->Create({64u << 20, 8, 100});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.err, ENOTSUP);
  EXPECT_FALSE(fs::exists(root.path() / "memory/code-interpreter/q"));  // nothing half made
}

TEST(CgroupV1, NoMemswWithoutSwapAccounting) {
  ScratchRoot root;
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
  ScratchRoot root;
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

// A fake cgroup2 fs in a temp dir: mkdir populates a new cgroup with control files the way the
// kernel does (cgroup.controllers = the parent's subtree_control, the controllers' interface
// files), and every operation is recorded in order.
class FakeCgroup2 {
 public:
  explicit FakeCgroup2(bool swap = true, bool kill = true) {
    hooks_.after_mkdir = [this, swap, kill](const std::string& d) {
      const fs::path dir(d);
      Put(dir / "cgroup.procs", "");
      Put(dir / "cgroup.subtree_control", "");
      Put(dir / "cgroup.controllers", Slurp(dir.parent_path() / "cgroup.subtree_control"));
      if (kill) Put(dir / "cgroup.kill", "");
      const std::string enabled = Slurp(dir.parent_path() / "cgroup.subtree_control");
      if (enabled.find("memory") != std::string::npos) {
        Put(dir / "memory.max", "max\n");
        if (swap) Put(dir / "memory.swap.max", "max\n");
        Put(dir / "memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
      }
      if (enabled.find("cpu") != std::string::npos) Put(dir / "cpu.max", "max 100000\n");
    };
    cgfs::SetTestHooks(&hooks_);
  }
  ~FakeCgroup2() { cgfs::SetTestHooks(nullptr); }
  FakeCgroup2(const FakeCgroup2&) = delete;
  FakeCgroup2& operator=(const FakeCgroup2&) = delete;

  const std::vector<std::string>& ops() const { return hooks_.ops; }
  void ClearOps() { hooks_.ops.clear(); }
  // The files the kernel would not let rmdir see: a cgroup directory vanishes with them.
  static void EmptyForRmdir(const fs::path& dir) { EmptyDir(dir); }

 private:
  cgfs::TestHooks hooks_;
};

// Index of the first op starting with `prefix`, or -1.
int OpIndex(const std::vector<std::string>& ops, const std::string& prefix) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].compare(0, prefix.size(), prefix) == 0) return static_cast<int>(i);
  }
  return -1;
}

TEST(CgroupV2, CreateWritesLimitsStatsAndTeardownOrder) {
  ScratchRoot root;  // the prepared parent, controllers enabled
  Put(root.path() / "cgroup.subtree_control", "memory pids cpu\n");
  FakeCgroup2 fake;
  auto cg = MakeCgroupV2(root.path(), "abc");
  const fs::path dir = root.path() / "abc";
  ASSERT_TRUE(cg->Create({128u << 20, 16, 0}).ok());
  EXPECT_EQ(Slurp(dir / "memory.max"), "134217728");
  EXPECT_EQ(Slurp(dir / "memory.swap.max"), "0");
  EXPECT_EQ(Slurp(dir / "pids.max"), "16");
  EXPECT_EQ(Slurp(dir / "cpu.max"), "max 100000\n");   // no cap: the kernel default stays
  EXPECT_FALSE(fs::exists(dir / "memory.oom.group"));  // deliberately not set (cgroups_v2.cc)
  ASSERT_TRUE(cg->AddProcess(77).ok());
  EXPECT_EQ(Slurp(dir / "cgroup.procs"), "77");
  EXPECT_EQ(cg->description(), "v2 " + dir.string());

  Put(dir / "memory.events", "low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\noom_group_kill 0\n");
  Put(dir / "pids.events", "max 0\n");
  Put(dir / "memory.peak", "4096\n");
  Put(dir / "cpu.stat", "usage_usec 1500000\nuser_usec 1000000\n");
  CgroupStats s = cg->ReadStats();
  EXPECT_TRUE(s.oom_killed);
  EXPECT_FALSE(s.pids_limit_hit);
  EXPECT_EQ(s.memory_peak_bytes, 4096u);
  EXPECT_EQ(s.cpu_ms, 1500u);
  Put(dir / "pids.events", "max 3\n");
  Put(dir / "memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
  s = cg->ReadStats();
  EXPECT_FALSE(s.oom_killed);
  EXPECT_TRUE(s.pids_limit_hit);

  // Teardown: cgroup.kill before the first rmdir. The fake's rmdir needs an empty directory, so
  // the first Remove fails after the kill; the second one succeeds.
  fake.ClearOps();
  Put(dir / "cgroup.procs", "");
  (void)cg->Remove();
  ASSERT_GE(fake.ops().size(), 2u);
  EXPECT_EQ(fake.ops()[0], "write " + (dir / "cgroup.kill").string() + " 1");
  EXPECT_EQ(fake.ops()[1], "rmdir " + dir.string());
  EmptyDir(dir);
  (void)cg->Remove();  // the other directories hold the files written above: not rmdir'd here
  EXPECT_FALSE(fs::exists(dir));
}

TEST(CgroupV2, NoSwapFileNoKillFileAndCpuCap) {
  ScratchRoot root;
  Put(root.path() / "cgroup.subtree_control", "memory pids cpu\n");
  FakeCgroup2 fake(/*swap=*/false, /*kill=*/false);
  auto cg = MakeCgroupV2(root.path(), "s");
  const fs::path dir = root.path() / "s";
  ASSERT_TRUE(cg->Create({64u << 20, 8, 150}).ok());
  EXPECT_FALSE(fs::exists(dir / "memory.swap.max"));  // no swap accounting: nothing to limit
  EXPECT_EQ(Slurp(dir / "cpu.max"), "150000 100000");
  // No cgroup.kill (kernel < 5.14): the listed pids are killed instead, then rmdir.
  Put(dir / "cgroup.procs", "");
  fake.ClearOps();
  EmptyDir(dir);
  EXPECT_TRUE(cg->Remove().ok());
  EXPECT_EQ(fake.ops(), std::vector<std::string>{"rmdir " + dir.string()});
}

TEST(CgroupV2, CpuCapWithoutCpuControllerIsRefused) {
  ScratchRoot root;
  Put(root.path() / "cgroup.subtree_control", "memory pids\n");
  FakeCgroup2 fake;
  auto cg = MakeCgroupV2(root.path(), "c");
  SysError e = cg->Create({64u << 20, 8, 50});
  EXPECT_EQ(e.err, ENOTSUP);
  EXPECT_THAT(e.what, testing::HasSubstr("cpu controller"));
  EmptyDir(root.path() / "c");
  EXPECT_TRUE(cg->Remove().ok());
}

TEST(CgroupV2, NeverReusesOrRemovesAStrangersDirectory) {
  ScratchRoot root;
  fs::create_directories(root.path() / "dup");
  auto cg = MakeCgroupV2(root.path(), "dup");
  EXPECT_EQ(cg->Create({64u << 20, 8, 0}).err, EEXIST);
  EXPECT_TRUE(cg->Remove().ok());
  EXPECT_TRUE(fs::exists(root.path() / "dup"));
}

TEST(CgroupV2Discovery, ParsesProcSelfCgroup) {
  std::string path;
  EXPECT_TRUE(ParseUnifiedCgroupPath("12:pids:/x\n0::/system.slice/ci.service\n", &path));
  EXPECT_EQ(path, "/system.slice/ci.service");
  EXPECT_TRUE(ParseUnifiedCgroupPath("0::/\n", &path));
  EXPECT_EQ(path, "/");
  EXPECT_FALSE(ParseUnifiedCgroupPath("4:memory:/a\n1:name=systemd:/\n", &path));
}

TEST(CgroupV2Discovery, FindsTheMountFromMountinfo) {
  const std::string mountinfo =
      "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
      "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
      "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "41 31 0:38 / /sys/fs/cgroup/un\\040ified rw,relatime shared:9 - cgroup2 cgroup2 rw\n";
  std::string mount, dir;
  ASSERT_TRUE(FindCgroup2Dir(mountinfo, "/system.slice/ci.service", &mount, &dir));
  EXPECT_EQ(mount, "/sys/fs/cgroup/un ified");  // octal escapes undone
  EXPECT_EQ(dir, "/sys/fs/cgroup/un ified/system.slice/ci.service");
  ASSERT_TRUE(FindCgroup2Dir(mountinfo, "/", &mount, &dir));
  EXPECT_EQ(dir, "/sys/fs/cgroup/un ified");
  EXPECT_FALSE(FindCgroup2Dir("35 31 0:32 / /m rw - cgroup cgroup rw,memory\n", "/", &mount, &dir));
}

TEST(CgroupV2Discovery, MountWithANonRootRootStripsItsPrefix) {
  // A bind mount of a subtree (or a mount made in another cgroup namespace): its root field says
  // which cgroup sits at the mount point. The deepest matching root wins.
  const std::string mountinfo =
      "40 1 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
      "50 1 0:38 /system.slice /mnt/slice rw - cgroup2 cgroup2 rw\n"
      "51 1 0:38 /system.slicex /mnt/other rw - cgroup2 cgroup2 rw\n";
  std::string mount, dir;
  ASSERT_TRUE(FindCgroup2Dir(mountinfo, "/system.slice/ci.service", &mount, &dir));
  EXPECT_EQ(dir, "/mnt/slice/ci.service");
}

// The daemon's view of a v2 host, all under a temp dir: mountinfo and /proc/self/cgroup say the
// daemon is in <mnt>/system.slice/ci.service.
struct V2Host {
  ScratchRoot tmp;
  fs::path mnt, own;
  CgroupProcInputs in;
  explicit V2Host(const std::string& controllers, const std::string& procs = "4242\n") {
    mnt = tmp.path() / "cgroup";
    own = mnt / "system.slice/ci.service";
    fs::create_directories(own);
    Put(tmp.path() / "mountinfo",
        "41 31 0:38 / " + mnt.string() + " rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
    Put(tmp.path() / "self_cgroup", "0::/system.slice/ci.service\n");
    Put(own / "cgroup.controllers", controllers);
    Put(own / "cgroup.subtree_control", "");
    Put(own / "cgroup.procs", procs);
    in.mountinfo = (tmp.path() / "mountinfo").string();
    in.self_cgroup = (tmp.path() / "self_cgroup").string();
    in.v1_root = (tmp.path() / "no-v1").string();
    in.self_pid = 4242;
  }
};

TEST(CgroupV2Setup, ProbeFindsOwnCgroupAndControllers) {
  V2Host host("cpu io memory pids\n");
  CgroupV2Probe p = ProbeCgroupV2(host.in);
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.mount, host.mnt.string());
  EXPECT_EQ(p.own, host.own.string());
  EXPECT_THAT(p.available, testing::ElementsAre("cpu", "io", "memory", "pids"));
  EXPECT_TRUE(p.Has("memory"));
  EXPECT_FALSE(p.Has("hugetlb"));
}

TEST(CgroupV2Setup, MovesTheDaemonIntoALeafThenDelegatesInOrder) {
  V2Host host("cpu io memory pids\n");
  FakeCgroup2 fake;
  CgroupSetup s = SetUpCgroups("", host.in);
  ASSERT_TRUE(s.ok) << s.error;
  const fs::path parent = host.own / "code-interpreter";
  EXPECT_EQ(s.layout.version, 2);
  EXPECT_EQ(s.layout.root, parent.string());
  EXPECT_THAT(s.controllers, testing::ElementsAre("memory", "pids", "cpu"));
  EXPECT_EQ(Slurp(host.own / "daemon/cgroup.procs"), "4242");
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_THAT(s.notes[0], testing::HasSubstr("moved the daemon (pid 4242)"));

  const std::string own = host.own.string();
  const std::vector<std::string> expected = {
      "mkdir " + own + "/daemon",
      "write " + own + "/daemon/cgroup.procs 4242",
      "write " + own + "/cgroup.subtree_control +memory +pids",
      "write " + own + "/cgroup.subtree_control +cpu",
      "mkdir " + own + "/code-interpreter",
      "write " + own + "/code-interpreter/cgroup.subtree_control +memory +pids",
      "write " + own + "/code-interpreter/cgroup.subtree_control +cpu",
  };
  EXPECT_EQ(fake.ops(), expected);

  // A sandbox below the prepared parent gets every limit file.
  auto cg = MakeCgroup(s.layout, "sb");
  // The fake kernel lists the last write only; enable all three as the kernel would have.
  Put(parent / "cgroup.subtree_control", "memory pids cpu\n");
  ASSERT_TRUE(cg->Create({32u << 20, 4, 200}).ok());
  EXPECT_EQ(Slurp(parent / "sb/memory.max"), "33554432");
  EXPECT_EQ(Slurp(parent / "sb/memory.swap.max"), "0");
  EXPECT_EQ(Slurp(parent / "sb/pids.max"), "4");
  EXPECT_EQ(Slurp(parent / "sb/cpu.max"), "200000 100000");
}

TEST(CgroupV2Setup, AlreadyDelegatedCgroupIsNotTouchedAgain) {
  V2Host host("memory pids\n", /*procs=*/"");
  Put(host.own / "cgroup.subtree_control", "memory pids\n");
  fs::create_directories(host.own / "code-interpreter");
  Put(host.own / "code-interpreter/cgroup.subtree_control", "memory pids\n");
  FakeCgroup2 fake;
  CgroupSetup s = SetUpCgroups("", host.in);
  ASSERT_TRUE(s.ok) << s.error;
  EXPECT_THAT(s.controllers, testing::ElementsAre("memory", "pids"));  // no cpu offered
  EXPECT_TRUE(s.notes.empty());
  EXPECT_EQ(fake.ops(),
            std::vector<std::string>{"mkdir " + host.own.string() + "/code-interpreter"});
  EXPECT_FALSE(fs::exists(host.own / "daemon"));
}

TEST(CgroupV2Setup, MissingMemoryNamesTheControllerAndTheFix) {
  V2Host host("cpu pids\n");
  FakeCgroup2 fake;
  CgroupSetup s = SetUpCgroups("", host.in);
  EXPECT_FALSE(s.ok);
  EXPECT_THAT(s.error,
              testing::HasSubstr("the memory controller is not available to " + host.own.string()));
  EXPECT_THAT(s.error, testing::HasSubstr("Delegate=yes"));
  EXPECT_THAT(s.error, testing::HasSubstr("echo +memory > " + (host.mnt / "system.slice").string() +
                                          "/cgroup.subtree_control"));
  EXPECT_TRUE(fake.ops().empty());  // nothing moved or written when it cannot work
  CgroupLayout layout;
  std::string why;
  EXPECT_FALSE(DetectCgroups(host.own.string() + "/nonexistent", &layout, &why));
}

TEST(CgroupV2Setup, MissingPidsNamesPids) {
  V2Host host("memory\n");
  CgroupSetup s = SetUpCgroups("", host.in);
  EXPECT_FALSE(s.ok);
  EXPECT_THAT(s.error, testing::HasSubstr("the pids controller"));
}

TEST(CgroupV2Setup, HybridHostFallsBackToV1WithoutTouchingV2) {
  V2Host host("hugetlb\n");  // like these machines: memory and pids are bound to v1
  const fs::path v1 = host.tmp.path() / "v1";
  fs::create_directories(v1 / "memory");
  fs::create_directories(v1 / "pids");
  Put(v1 / "memory/memory.limit_in_bytes", "");
  host.in.v1_root = v1.string();
  FakeCgroup2 fake;
  CgroupSetup s = SetUpCgroups("", host.in);
  ASSERT_TRUE(s.ok) << s.error;
  EXPECT_EQ(s.layout.version, 1);
  EXPECT_EQ(s.layout.root, v1.string());
  EXPECT_TRUE(fake.ops().empty());
}

TEST(CgroupV2Setup, ConfiguredRootReceivesSandboxesDirectly) {
  ScratchRoot root;
  Put(root.path() / "cgroup.controllers", "cpu memory pids\n");
  Put(root.path() / "cgroup.subtree_control", "");
  FakeCgroup2 fake;
  CgroupSetup s = SetUpCgroups(root.path().string(), {});
  ASSERT_TRUE(s.ok) << s.error;
  EXPECT_EQ(s.layout.version, 2);
  EXPECT_EQ(s.layout.root, root.path().string());
  EXPECT_EQ(OpIndex(fake.ops(), "mkdir"), -1);  // no move, no extra level
  EXPECT_EQ(fake.ops().front(),
            "write " + root.path().string() + "/cgroup.subtree_control +memory +pids");
}

TEST(CgroupV2Setup, ConfiguredRootWithoutPidsIsAnError) {
  ScratchRoot root;
  Put(root.path() / "cgroup.controllers", "memory\n");
  CgroupSetup s = SetUpCgroups(root.path().string(), {});
  EXPECT_FALSE(s.ok);
  EXPECT_THAT(s.error, testing::HasSubstr("pids controller"));
}

TEST(CgroupDetect, ClassifiesConfiguredRoots) {
  ScratchRoot v2, v1, none;
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
  EXPECT_THAT(why, testing::HasSubstr("neither a cgroup v2 directory"));
}

TEST(CgroupDetect, V2WithoutPidsFallsBack) {
  ScratchRoot root;
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

// Issue 34: the freezer helpers against the kernel's own cgroupfs, v1 (the freezer hierarchy)
// and v2 (any cgroup2 mount: cgroup.freeze needs no controller); as root, skipped elsewhere.
// A child counting in shared memory must stand still while frozen and go on after the thaw.
class RealFreezerTest : public ::testing::TestWithParam<int> {
 protected:
  // Where a test cgroup of this version may go: "" when none.
  static std::string Mount(int version) {
    std::ifstream mounts("/proc/mounts");
    for (std::string line; std::getline(mounts, line);) {
      std::istringstream fields(line);
      std::string dev, dir, type, options;
      fields >> dev >> dir >> type >> options;
      if (version == 2 && type == "cgroup2") return dir;
      if (version == 1 && type == "cgroup" &&
          ("," + options + ",").find(",freezer,") != std::string::npos) {
        return dir;
      }
    }
    return "";
  }
  static bool AwaitFrozen(const CgroupFreezer& f, bool frozen) {
    for (int i = 0; i < 2000 && IsFrozen(f) != frozen; ++i) ::usleep(1000);
    return IsFrozen(f) == frozen;
  }
  // The child's end: its signal, or -1 when it did not end within 5 s.
  static int AwaitEnd(pid_t pid) {
    for (int i = 0; i < 500; ++i) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid)
        return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      ::usleep(10000);
    }
    return -1;
  }
};

TEST_P(RealFreezerTest, StopsAndThawsAndKillsATask) {
  const int version = GetParam();
  const std::string mount = Mount(version);
  if (::geteuid() != 0 || mount.empty()) GTEST_SKIP() << "needs root and a cgroup mount";
  const CgroupFreezer f{version, mount + "/ci-freeze-test-" + std::to_string(::getpid())};
  if (!cgfs::Mkdir(f.dir, false).ok()) GTEST_SKIP() << "cannot create " << f.dir;
  pid_t child = -1;
  // A failed assertion leaves nothing frozen or running behind.
  struct Cleanup {
    const CgroupFreezer& f;
    pid_t& child;
    ~Cleanup() {
      if (child > 0 && ::kill(child, SIGKILL) == 0) {
        (void)WriteFrozen(f, false);
        ::waitpid(child, nullptr, 0);
      }
      ::rmdir(f.dir.c_str());
    }
  } cleanup{f, child};
  auto* counter = static_cast<std::atomic<uint64_t>*>(
      ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(counter, MAP_FAILED);
  for (bool kill_by_removal : {false, true}) {
    SCOPED_TRACE(kill_by_removal ? "KillAndRmdir" : "KillAndThaw");
    child = ::fork();
    if (child == 0) {
      for (;;) counter->fetch_add(1), ::usleep(1000);
    }
    ASSERT_TRUE(cgfs::WriteFile(f.dir + "/cgroup.procs", std::to_string(child)).ok());
    EXPECT_FALSE(FreezeAsked(f));
    ASSERT_TRUE(WriteFrozen(f, true).ok());
    EXPECT_TRUE(FreezeAsked(f));
    ASSERT_TRUE(AwaitFrozen(f, true));
    const uint64_t frozen_at = *counter;
    ::usleep(200000);
    EXPECT_EQ(*counter, frozen_at) << "it ran while frozen";
    ASSERT_TRUE(WriteFrozen(f, false).ok());
    ASSERT_TRUE(AwaitFrozen(f, false));
    for (int i = 0; i < 500 && *counter == frozen_at; ++i) ::usleep(10000);
    EXPECT_NE(*counter, frozen_at) << "it did not go on after the thaw";
    // Frozen again, then killed: v1 holds a frozen task's SIGKILL until the thaw.
    ASSERT_TRUE(WriteFrozen(f, true).ok());
    ASSERT_TRUE(AwaitFrozen(f, true));
    if (kill_by_removal) {
      EXPECT_TRUE(cgfs::KillAndRmdir(f.dir, f.dir + "/cgroup.procs").ok());
      EXPECT_FALSE(cgfs::Exists(f.dir));
    } else {
      EXPECT_TRUE(KillAndThaw(f).ok());
      EXPECT_FALSE(FreezeAsked(f));
    }
    EXPECT_EQ(AwaitEnd(child), SIGKILL);
    child = -1;
  }
  ::munmap(counter, 4096);
}

INSTANTIATE_TEST_SUITE_P(Versions, RealFreezerTest, ::testing::Values(1, 2));

}  // namespace
}  // namespace ci::runtime
