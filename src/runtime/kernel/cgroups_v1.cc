// cgroup v1: one directory per controller (memory, pids, cpuacct for usage and freezer for
// Sandbox::Freeze when mounted, and cpu when a bandwidth cap is asked for), each at
// <root>/<controller>/code-interpreter/<name>.
#include <sys/stat.h>

#include <string>
#include <vector>

#include "runtime/kernel/cgroups.h"

namespace ci::runtime {
namespace {

class CgroupV1 final : public Cgroup {
 public:
  CgroupV1(std::string root, std::string name) : root_(std::move(root)), name_(std::move(name)) {
    controllers_ = {"memory", "pids"};
    if (cgfs::Exists(root_ + "/cpuacct")) controllers_.push_back("cpuacct");
  }

  SysError Create(const CgroupLimits& limits) override {
    if (limits.cpu_percent > 0) {
      // Refused rather than dropped: the caller asked for a cap this host cannot give.
      if (!cgfs::Exists(root_ + "/cpu/cpu.cfs_quota_us")) {
        return SysFailErr(ENOTSUP, "a CPU cap needs the cgroup v1 cpu controller at " + root_ +
                                       "/cpu (CFS bandwidth control)");
      }
      // Where cpu and cpuacct share one hierarchy (the usual "cpu,cpuacct" mount), one
      // directory serves both: a second mkdir there would fail.
      if (!SameHierarchy("cpu", "cpuacct")) controllers_.push_back("cpu");
    }
    for (const auto& c : controllers_) {
      std::string parent = root_ + "/" + c + "/" + kCgroupParent;
      if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
        return SysFailErr(errno, "mkdir " + parent);
      }
      std::string dir = Dir(c);
      if (::mkdir(dir.c_str(), 0755) != 0) return SysFailErr(errno, "mkdir " + dir);
      created_.push_back(c);
    }
    CreateFreezer();
    const std::string mem = Dir("memory");
    const std::string bytes = std::to_string(limits.memory_bytes);
    // Swappiness first: a zero value keeps the kernel from swapping this group out even where
    // memsw accounting is off. Not writable on some kernels (cgroup v1 on newer kernels), so
    // failures are ignored.
    (void)cgfs::WriteFile(mem + "/memory.swappiness", "0");
    CI_SYS_RETURN_IF_ERROR(cgfs::WriteFile(mem + "/memory.limit_in_bytes", bytes));
    // memory.memsw.limit_in_bytes counts memory+swap, so setting it equal to the memory limit
    // means zero swap. It must be written after limit_in_bytes (the kernel rejects memsw < mem).
    if (cgfs::Exists(root_ + "/memory/memory.memsw.limit_in_bytes")) {
      CI_SYS_RETURN_IF_ERROR(cgfs::WriteFile(mem + "/memory.memsw.limit_in_bytes", bytes));
    }
    CI_SYS_RETURN_IF_ERROR(cgfs::WriteFile(Dir("pids") + "/pids.max", std::to_string(limits.pids)));
    if (limits.cpu_percent == 0) return SysOk();
    // CFS bandwidth: `quota` µs of CPU per 100 ms period, so 150% = one and a half cores.
    const std::string cpu = Dir(SameHierarchy("cpu", "cpuacct") ? "cpuacct" : "cpu");
    CI_SYS_RETURN_IF_ERROR(cgfs::WriteFile(cpu + "/cpu.cfs_period_us", "100000"));
    return cgfs::WriteFile(cpu + "/cpu.cfs_quota_us",
                           std::to_string(uint64_t{limits.cpu_percent} * 1000));
  }

  SysError AddProcess(pid_t pid) override {
    for (const auto& c : controllers_) {
      CI_SYS_RETURN_IF_ERROR(cgfs::WriteFile(Dir(c) + "/cgroup.procs", std::to_string(pid)));
    }
    if (freezer_ && !cgfs::WriteFile(Dir("freezer") + "/cgroup.procs", std::to_string(pid)).ok()) {
      // Gone rather than empty: freezing an empty cgroup would stop nothing yet say it did.
      freezer_ = !cgfs::KillAndRmdir(Dir("freezer"), Dir("freezer") + "/cgroup.procs").ok();
    }
    return SysOk();
  }

  CgroupStats ReadStats() const override {
    CgroupStats s;
    uint64_t v = 0;
    // "oom_kill N" exists since Linux 4.13; "under_oom" alone would miss a finished kill.
    if (cgfs::ReadKey(Dir("memory") + "/memory.oom_control", "oom_kill", &v)) s.oom_killed = v > 0;
    if (cgfs::ReadKey(Dir("pids") + "/pids.events", "max", &v)) s.pids_limit_hit = v > 0;
    if (cgfs::ReadU64(Dir("memory") + "/memory.max_usage_in_bytes", &v)) s.memory_peak_bytes = v;
    if (HasCpuacct() && cgfs::ReadU64(Dir("cpuacct") + "/cpuacct.usage", &v)) {
      s.cpu_ms = v / 1000000;
    }
    return s;
  }

  SysError Remove() override {
    (void)ThawForKill();  // frozen tasks would hold every hierarchy's directory
    SysError first;
    // Only what Create made: a failed Create must not remove a same-named stranger.
    for (const auto& c : created_) {
      SysError e = cgfs::KillAndRmdir(Dir(c), Dir(c) + "/cgroup.procs");
      if (first.ok() && !e.ok()) first = e;
    }
    created_.clear();
    if (freezer_) {
      SysError e = cgfs::KillAndRmdir(Dir("freezer"), Dir("freezer") + "/cgroup.procs");
      if (first.ok() && !e.ok()) first = e;
      freezer_ = !e.ok();
    }
    return first;
  }

  SysError ThawForKill() override {
    if (!freezer_) return SysOk();
    return KillAndThaw({1, Dir("freezer")});
  }

  std::string description() const override {
    std::string d = "v1 ";
    for (size_t i = 0; i < controllers_.size(); ++i) d += (i ? "," : "") + controllers_[i];
    return d + (freezer_ ? ",freezer" : "") + ":" + kCgroupParent + "/" + name_;
  }

 private:
  // Best effort, for Sandbox::Freeze only: a host whose freezer hierarchy is missing, shared
  // with another controller or not writable still gets its sandboxes (Freeze is unavailable).
  void CreateFreezer() {
    if (!cgfs::Exists(root_ + "/freezer/cgroup.procs")) return;
    for (const char* c : {"memory", "pids", "cpuacct"}) {
      if (SameHierarchy("freezer", c)) {  // that controller's directory: made already
        freezer_ = cgfs::Exists(Dir("freezer") + "/freezer.state");
        return;
      }
    }
    const std::string parent = root_ + "/freezer/" + kCgroupParent;
    if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) return;
    freezer_ = ::mkdir(Dir("freezer").c_str(), 0755) == 0;
  }

  std::string Dir(const std::string& controller) const {
    return root_ + "/" + controller + "/" + kCgroupParent + "/" + name_;
  }
  bool SameHierarchy(const std::string& a, const std::string& b) const {
    struct stat sa {
    }, sb{};
    return ::stat((root_ + "/" + a).c_str(), &sa) == 0 &&
           ::stat((root_ + "/" + b).c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
  }
  bool HasCpuacct() const {
    for (const auto& c : controllers_) {
      if (c == "cpuacct") return true;
    }
    return false;
  }

  std::string root_;
  std::string name_;
  std::vector<std::string> controllers_;
  std::vector<std::string> created_;
  bool freezer_ = false;  // Dir("freezer") was made and holds the sandbox
};

}  // namespace

std::unique_ptr<Cgroup> MakeCgroupV1(std::string root, std::string name) {
  return std::make_unique<CgroupV1>(std::move(root), std::move(name));
}

}  // namespace ci::runtime
