// One sandbox's cgroup, behind a small interface with a v1 and a v2 implementation, plus the
// daemon-side setup that finds (v2: delegates) the place sandboxes' cgroups live in. Everything is
// parameterised by directories and input files so the unit tests run it against a temp directory
// laid out like cgroupfs. The Cgroup classes run in the shim parent (exception-free); the setup
// runs once in the daemon.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/resource_report.h"
#include "runtime/kernel/sys_error.h"

namespace ci::runtime {

struct CgroupLayout {
  int version = 0;  // 1 or 2
  // v2: the prepared parent directory sandboxes' cgroups are created in; v1: the directory
  // holding the <controller>/ mounts.
  std::string root;
};

struct CgroupLimits {
  uint64_t memory_bytes = 0;  // swap is always 0
  uint32_t pids = 0;
  // v2 cpu.max bandwidth cap in percent of one CPU (150 = one and a half CPUs); 0 leaves cpu.max
  // at the kernel default "max 100000" (unlimited). CPU *time* is RLIMIT_CPU's job, not this.
  uint32_t cpu_percent = 0;
};

using CgroupStats = ResourceReport;

class Cgroup {
 public:
  virtual ~Cgroup() = default;
  // Creates the sandbox's directory and writes the limits.
  virtual SysError Create(const CgroupLimits& limits) = 0;
  virtual SysError AddProcess(pid_t pid) = 0;
  // Best effort: missing files leave the fields at their defaults.
  virtual CgroupStats ReadStats() const = 0;
  // Kills whatever is left inside, then removes the directories (retrying briefly, the kernel
  // frees a cgroup only after its last task is fully gone). Only what Create made.
  virtual SysError Remove() = 0;
  // After init's SIGKILL: when the daemon froze the sandbox (Sandbox::Freeze), kills every task
  // and thaws the cgroup, since a v1-frozen task takes no signal until it is thawed.
  virtual SysError ThawForKill() { return SysOk(); }
  virtual std::string description() const = 0;  // "v1 memory,pids,cpuacct:code-interpreter/ab12"
};

constexpr const char* kCgroupParent = "code-interpreter";
// v2: the leaf the daemon moves itself into so its own cgroup may delegate controllers.
constexpr const char* kCgroupDaemonLeaf = "daemon";

// v1: `root` holds the controller mounts; sandboxes are
// <root>/<controller>/code-interpreter/<name>.
std::unique_ptr<Cgroup> MakeCgroupV1(std::string root, std::string name);
// v2: `parent` is the prepared directory (controllers enabled in its subtree_control, see
// SetUpCgroups); the sandbox is <parent>/<name>.
std::unique_ptr<Cgroup> MakeCgroupV2(std::string parent, std::string name);
std::unique_ptr<Cgroup> MakeCgroup(const CgroupLayout& layout, std::string name);

// Where the daemon reads its own view of cgroups. Tests point these at files of their own.
struct CgroupProcInputs {
  std::string mountinfo = "/proc/self/mountinfo";
  std::string self_cgroup = "/proc/self/cgroup";
  std::string v1_root = "/sys/fs/cgroup";  // holds memory/, pids/, cpuacct/ on v1 hosts
  pid_t self_pid = 0;                      // 0: getpid()
};

// The daemon's own cgroup v2, read-only.
struct CgroupV2Probe {
  std::string error;                   // why no own v2 cgroup was found; empty when found
  std::string mount;                   // the cgroup2 mount point (from mountinfo)
  std::string own;                     // the daemon's cgroup directory under `mount`
  std::vector<std::string> available;  // <own>/cgroup.controllers
  std::vector<std::string> enabled;    // <own>/cgroup.subtree_control
  bool Has(std::string_view controller) const;
};

// The unified (0::) path from /proc/self/cgroup contents; false when there is none.
bool ParseUnifiedCgroupPath(std::string_view proc_self_cgroup, std::string* path);
// The directory of cgroup `path` (as /proc/self/cgroup names it) through a cgroup2 mount listed in
// mountinfo contents: the mount whose root is the longest prefix of `path`. False: none.
bool FindCgroup2Dir(std::string_view mountinfo, const std::string& path, std::string* mount,
                    std::string* dir);
CgroupV2Probe ProbeCgroupV2(const CgroupProcInputs& in);
// "the memory controller is not available to <own> ...; fix: ..." for the doctor and errors.
std::string MissingV2ControllerMessage(const CgroupV2Probe& probe, const std::string& controller);

struct CgroupSetup {
  bool ok = false;
  CgroupLayout layout;
  std::string error;                     // when !ok: what is missing and how to fix it
  std::vector<std::string> controllers;  // v2: enabled for sandboxes ("memory", "pids", "cpu")
  std::vector<std::string> notes;        // what was changed ("moved the daemon into ...")
};

// Finds where sandboxes' cgroups go and, for v2, makes it usable. configured_root "" = detect:
// the daemon's own v2 cgroup when it offers memory and pids (the daemon moves itself into the
// leaf <own>/daemon when its cgroup holds processes, enables the controllers in
// <own>/cgroup.subtree_control, creates <own>/code-interpreter and enables them there too), else
// v1 controllers under in.v1_root. A configured root is a v2 directory that receives the sandboxes
// directly (when it has cgroup.controllers; controllers are enabled in it if needed) or a v1 root.
// Has side effects: call it once per process, in the daemon (SetUpCgroupsOnce).
CgroupSetup SetUpCgroups(const std::string& configured_root, const CgroupProcInputs& in);
// SetUpCgroups(configured_root, {}) memoised per process for "": the daemon moves itself once,
// and later executors (tests, `run`) reuse the result instead of nesting deeper.
CgroupSetup SetUpCgroupsOnce(const std::string& configured_root);

// Read-only: would SetUpCgroups find usable controllers? (health checks, the doctor)
bool DetectCgroups(const std::string& configured_root, CgroupLayout* out, std::string* why_not);

// v1: <root>/memory (with memory.limit_in_bytes) and <root>/pids exist.
bool CgroupV1Usable(const std::string& root);
std::string CgroupV1Missing(const std::string& root);

// Empty when sandboxes' cgroups of this layout take a CPU cap (Cgroup::Create refuses one
// otherwise): v1 a cpu controller with CFS bandwidth control, v2 cpu enabled in the parent's
// subtree_control. Else why not.
std::string CpuCapUnavailable(const CgroupLayout& layout);

// The freezer of one sandbox's cgroup: v2 its directory (cgroup.freeze, and cgroup.events'
// "frozen"), v1 its directory in the freezer hierarchy (freezer.state).
struct CgroupFreezer {
  int version = 0;
  std::string dir;
  std::string control() const;  // the file written: cgroup.freeze or freezer.state
};
// Asks the kernel to freeze or thaw; it gets there asynchronously (IsFrozen tells when).
SysError WriteFrozen(const CgroupFreezer& f, bool frozen);
// Every task stopped (v1 FROZEN, v2 "frozen 1"); false while freezing, thawed or unreadable.
bool IsFrozen(const CgroupFreezer& f);
// Asked to be frozen (v1 not THAWED, v2 cgroup.freeze 1), whether or not it got there yet.
bool FreezeAsked(const CgroupFreezer& f);
// Kills every task of a frozen (or freezing) cgroup, then thaws it, so that they die without
// running again; nothing when it is not frozen. v2 kills with cgroup.kill where it exists.
SysError KillAndThaw(const CgroupFreezer& f);

// A random 16-hex-digit name.
std::string RandomCgroupName();

// One sandbox's cgroup name: "<parent pid>-<random>" (a shim's or the zygote's pid), so that the
// reaper can tell the cgroups of dead parents from those of live ones (cgroup_reaper.h).
std::string SandboxCgroupName();

// Small file helpers shared by both versions (also used by tests).
namespace cgfs {
SysError WriteFile(const std::string& path, const std::string& value);
bool ReadFile(const std::string& path, std::string* out);
bool Exists(const std::string& path);
// mkdir 0755; an existing directory is fine when exist_ok.
SysError Mkdir(const std::string& path, bool exist_ok);
// "key value" lines (memory.events, pids.events, cpu.stat, memory.oom_control).
bool ReadKey(const std::string& path, const std::string& key, uint64_t* value);
bool ReadU64(const std::string& path, uint64_t* value);
// Whitespace-separated words of a file (cgroup.controllers, cgroup.procs); empty when missing.
std::vector<std::string> ReadWords(const std::string& path);
// SIGKILLs every pid listed in procs_file (cgroup.procs).
void KillListed(const std::string& procs_file);
// Removes dir, first SIGKILLing the pids listed in procs_file (and thawing dir when it is a
// frozen cgroup: its tasks take the signal only then), retrying for about a second.
SysError KillAndRmdir(const std::string& dir, const std::string& procs_file);
// Tests only (not thread-safe): every write ("write <path> <value>"), mkdir and first rmdir
// attempt ("mkdir <path>", "rmdir <path>") is appended to `ops` so the order can be asserted, and
// after_mkdir lets a fake cgroupfs populate a new directory with control files as the kernel does.
struct TestHooks {
  std::vector<std::string> ops;
  std::function<void(const std::string& dir)> after_mkdir;
};
void SetTestHooks(TestHooks* hooks);
}  // namespace cgfs

}  // namespace ci::runtime
