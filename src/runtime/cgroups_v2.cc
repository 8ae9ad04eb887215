// cgroup v2: one directory at <root>/code-interpreter/<name>, with memory and pids (and cpu when
// offered) enabled in the parents' cgroup.subtree_control.
#include <sys/stat.h>

#include <string>

#include "runtime/cgroups.h"

namespace ci {
namespace {

class CgroupV2 final : public Cgroup {
 public:
  CgroupV2(std::string root, std::string name)
      : root_(std::move(root)),
        parent_(root_ + "/" + kCgroupParent),
        dir_(parent_ + "/" + name),
        name_(std::move(name)) {}

  SysError Create(const CgroupLimits& limits) override {
    if (::mkdir(parent_.c_str(), 0755) != 0 && errno != EEXIST) {
      return SysFailErr(errno, "mkdir " + parent_);
    }
    // Controllers must be enabled in every ancestor's subtree_control before a child can use
    // them. "+cpu" is optional (only for usage_usec, which cpu.stat reports even without it).
    for (const std::string& dir : {root_, parent_}) {
      CI_SYS_RETURN_IF_ERROR(cgfs::WriteFile(dir + "/cgroup.subtree_control", "+memory +pids"));
    }
    if (::mkdir(dir_.c_str(), 0755) != 0) return SysFailErr(errno, "mkdir " + dir_);
    created_ = true;
    CI_SYS_RETURN_IF_ERROR(
        cgfs::WriteFile(dir_ + "/memory.max", std::to_string(limits.memory_bytes)));
    // memory.swap.max only exists with swap accounting; without it there is no swap to limit.
    if (cgfs::Exists(dir_ + "/memory.swap.max") || cgfs::Exists(root_ + "/memory.swap.max")) {
      CI_SYS_RETURN_IF_ERROR(cgfs::WriteFile(dir_ + "/memory.swap.max", "0"));
    }
    return cgfs::WriteFile(dir_ + "/pids.max", std::to_string(limits.pids));
  }

  SysError AddProcess(pid_t pid) override {
    return cgfs::WriteFile(dir_ + "/cgroup.procs", std::to_string(pid));
  }

  CgroupStats ReadStats() const override {
    CgroupStats s;
    uint64_t v = 0;
    if (cgfs::ReadKey(dir_ + "/memory.events", "oom_kill", &v)) s.oom_killed = v > 0;
    if (cgfs::ReadKey(dir_ + "/pids.events", "max", &v)) s.pids_limit_hit = v > 0;
    if (cgfs::ReadU64(dir_ + "/memory.peak", &v)) s.memory_peak_bytes = v;  // Linux 5.19+
    if (cgfs::ReadKey(dir_ + "/cpu.stat", "usage_usec", &v)) s.cpu_ms = v / 1000;
    return s;
  }

  SysError Remove() override {
    if (!created_) return SysOk();
    // cgroup.kill (Linux 5.14+) kills every task atomically, including ones forking right now;
    // KillAndRmdir's pid walk is the fallback for older kernels.
    if (cgfs::Exists(dir_ + "/cgroup.kill")) (void)cgfs::WriteFile(dir_ + "/cgroup.kill", "1");
    SysError e = cgfs::KillAndRmdir(dir_, dir_ + "/cgroup.procs");
    if (e.ok()) created_ = false;
    return e;
  }

  std::string description() const override {
    return std::string("v2 ") + kCgroupParent + "/" + name_;
  }

 private:
  std::string root_;
  std::string parent_;
  std::string dir_;
  std::string name_;
  bool created_ = false;
};

}  // namespace

std::unique_ptr<Cgroup> MakeCgroupV2(std::string root, std::string name) {
  return std::make_unique<CgroupV2>(std::move(root), std::move(name));
}

}  // namespace ci
