// A container's cgroup counters (CPU time, memory peak, OOM kills, pids-limit hits), read either
// from the host (a local dockerd: the container's cgroup directories are found from
// /proc/<State.Pid>/cgroup and /proc/self/mountinfo, no exec needed, works even when the pids
// limit is full) or from inside the container by an exec (a remote dockerd). The Engine's stats
// endpoint is not used: a one-shot call waits for its 1 s sampling tick.
// The parsers are pure and unit-tested; only the *Host* functions touch the filesystem.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/resource_report.h"

namespace ci::container {

// ResourceReport's fields: memory_peak_bytes from v1 memory.max_usage_in_bytes or v2
// memory.peak (kernel 5.19+), oom_killed from oom_kill > 0 (v1 memory.oom_control, v2
// memory.events), pids_limit_hit from "max" > 0 in pids.events.
struct CgroupCounters : ResourceReport {
  bool any = false;              // at least one known file was present
  bool has_cpu = false;          // cpuacct.usage (v1) or cpu.stat usage_usec (v2) was present
  uint64_t oom_kills = 0;        // oom_kill (sessions compare it before and after a call)
  uint64_t pids_limit_hits = 0;  // pids.events "max"
  // kInContainerCountersScript: the CPU time of the processes in the sandbox's pid namespace
  // now (and of the children they reaped), the probe itself left out.
  bool has_processes_cpu = false;
  uint64_t processes_cpu_ms = 0;
};

// A recycled container's counters when its execution began (all zero for a new one): CPU time,
// OOM kills and pids-limit hits are reported as the growth since (src/agent/recycle.h).
struct CountersBaseline {
  uint64_t cpu_ms = 0;
  uint64_t oom_kills = 0;
  uint64_t pids_limit_hits = 0;
};

// `now` less `base`: what happened since the baseline was taken.
CgroupCounters SinceBaseline(const CgroupCounters& now, const CountersBaseline& base);

// file base name ("memory.events", "cpuacct.usage", ...) -> contents.
using CgroupFiles = std::map<std::string, std::string>;

CgroupCounters ParseCgroupFiles(const CgroupFiles& files);

// The in-container probe: kills every process of the sandbox user but PID 1 (kill(-1) spares the
// namespace's init and the caller), then prints each counter file it can read as "@<name>" and
// the contents. v1 (controller directories) and v2 (one directory) alike.
extern const char* const kInContainerProbeScript;
// The same without the kill (a program forked by a fork server: the agent killed its leftovers).
extern const char* const kInContainerReadScript;
// The same without the kill (sessions: background programs live on between runs), and then the
// CPU time of the sandbox's processes as "@procs.cpu" (clock ticks): unlike the cgroup's, it does
// not include the probe execs' own (a shell, and the engine's exec setup).
extern const char* const kInContainerCountersScript;
// After an agent's recycle, from inside (a pod's agent channel): the counter files, then how many
// processes the container's cgroup holds (this probe's shell among them) as "@cgroup.procs"
// (RecycledProcessCount), counted by the shell's builtins so that it is the only extra process.
extern const char* const kRecycledProbeScript;
// That count; -1 when the probe could read no cgroup.procs.
int RecycledProcessCount(const CgroupFiles& files);
// Splits the probe's output back into files.
CgroupFiles SplitProbeOutput(std::string_view text);

// The container's cgroup directories on this host.
struct HostCgroup {
  bool v2 = false;
  std::string unified;  // v2: the container's directory
  std::string memory;   // v1 controller directories ("" when the controller is not mounted)
  std::string pids;
  std::string cpuacct;
  // The directory whose cgroup.procs lists every process of the container.
  const std::string& procs_dir() const { return v2 ? unified : pids; }
};

// From /proc/<pid>/cgroup (of the container's PID 1) and /proc/self/mountinfo contents. The
// container's path must contain its id (cgroupfs "/docker/<id>", systemd "docker-<id>.scope"):
// otherwise the pid is not the container's as seen from here (a dockerd in a VM, another pid
// namespace), and false is returned with the reason.
bool FindContainerCgroup(std::string_view proc_pid_cgroup, std::string_view mountinfo,
                         std::string_view container_id, HostCgroup* out, std::string* why);

// Reads the counter files of `cg` (missing files are left out).
CgroupFiles ReadHostCgroupFiles(const HostCgroup& cg);

// Makes the memory peak start again from the current usage (v1 memory.max_usage_in_bytes; v2's
// memory.peak resets only for the descriptor written to): false when it cannot.
bool ResetHostMemoryPeak(const HostCgroup& cg);

// How many processes the container's cgroup holds (cgroup.procs: every process of the container,
// whatever pid namespace it is in and whether or not the agent can see it); -1 when unreadable.
int CountHostCgroupProcesses(const HostCgroup& cg);

// SIGKILLs every process of the container but `init_pid`, through pidfds checked against the
// container's cgroup (no pid-reuse race), until none is left or about a second has passed.
// Returns false when a process could not be killed (EPERM: a daemon without the rights; no
// pidfd support) so the caller falls back to the in-container kill.
bool KillHostCgroupProcesses(const HostCgroup& cg, pid_t init_pid, std::string_view container_id);

}  // namespace ci::container
