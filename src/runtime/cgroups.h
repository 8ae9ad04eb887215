// One sandbox's cgroup, behind a small interface with a v1 and a v2 implementation. Both are
// parameterised by a root directory so the unit tests run them against a temp directory laid out
// like cgroupfs. Used by the shim parent (exception-free) and by the daemon's self-check.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/plan.h"
#include "runtime/sys_error.h"

namespace ci {

struct CgroupLimits {
  uint64_t memory_bytes = 0;  // swap is always 0
  uint32_t pids = 0;
};

struct CgroupStats {
  bool oom_killed = false;
  bool pids_limit_hit = false;
  uint64_t memory_peak_bytes = 0;
  uint64_t cpu_ms = 0;  // 0 when no cpu accounting controller is available
};

class Cgroup {
 public:
  virtual ~Cgroup() = default;
  // Creates code-interpreter/<name> (and the parent) and writes the limits.
  virtual SysError Create(const CgroupLimits& limits) = 0;
  virtual SysError AddProcess(pid_t pid) = 0;
  // Best effort: missing files leave the fields at their defaults.
  virtual CgroupStats ReadStats() const = 0;
  // Kills whatever is left inside, then removes the directories (retrying briefly, the kernel
  // frees a cgroup only after its last task is fully gone).
  virtual SysError Remove() = 0;
  virtual std::string description() const = 0;  // "v1 memory,pids,cpuacct:code-interpreter/ab12"
};

constexpr const char* kCgroupParent = "code-interpreter";

std::unique_ptr<Cgroup> MakeCgroupV1(std::string root, std::string name);
std::unique_ptr<Cgroup> MakeCgroupV2(std::string root, std::string name);
std::unique_ptr<Cgroup> MakeCgroup(const CgroupLayout& layout, std::string name);

// configured_root "" = /sys/fs/cgroup: v2 when it is a cgroup2 mount offering memory and pids,
// else v1 when <root>/memory and <root>/pids exist. A configured root is classified by its layout
// (cgroup.controllers => v2).
bool DetectCgroups(const std::string& configured_root, CgroupLayout* out, std::string* why_not);

// A random 16-hex-digit name for one sandbox's cgroup.
std::string RandomCgroupName();

// Small file helpers shared by both versions (also used by tests).
namespace cgfs {
SysError WriteFile(const std::string& path, const std::string& value);
bool ReadFile(const std::string& path, std::string* out);
bool Exists(const std::string& path);
// "key value" lines (memory.events, pids.events, cpu.stat, memory.oom_control).
bool ReadKey(const std::string& path, const std::string& key, uint64_t* value);
bool ReadU64(const std::string& path, uint64_t* value);
// Removes dir, first SIGKILLing the pids listed in procs_file, retrying for about a second.
SysError KillAndRmdir(const std::string& dir, const std::string& procs_file);
}  // namespace cgfs

}  // namespace ci
