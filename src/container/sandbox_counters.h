// A sandbox's cgroup counters (README "One execution", step 3) into its ResourceReport: read on
// the host when the Engine is local and the container's PID 1 is visible here (cgroup_probe.h's
// host functions, no exec), else by the in-container probe exec.
#pragma once

#include <sys/types.h>

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <optional>

#include "container/cgroup_probe.h"
#include "container/container_exec.h"
#include "core/resource_report.h"

namespace ci::container {

// The container's CPU time so far, read on the host.
uint64_t HostCpuMs(const HostCgroup& host);

// The container's cgroup on this host and its PID 1 as seen here (`init_pid`), when the Engine
// is local and that PID 1's cgroup names the container; nullopt otherwise (counters by exec).
asio::awaitable<std::optional<HostCgroup>> LocateHostCgroup(ContainerApi& api,
                                                            const std::string& container_id,
                                                            pid_t* init_pid);

class SandboxCounters {
 public:
  // host_cgroups: DockerExecutorOptions::host_cgroups (false: always the exec probe).
  SandboxCounters(Container c, bool host_cgroups) : c_(std::move(c)), host_cgroups_(host_cgroups) {}

  // Reads the counters into report() (its flags are only ever set). kill_leftovers: first kill
  // every process but PID 1 (the exec probe always does, but in sessions).
  asio::awaitable<void> Read(bool kill_leftovers);

  ResourceReport& report() { return report_; }
  const ResourceReport& report() const { return report_; }
  uint64_t oom_kills() const { return oom_kills_; }  // the cgroup's OOM kill count, as last read
  // The sandbox's CPU time as last read, less an allowance for the probe execs' own CPU (each
  // charged to the sandbox's cgroup: the engine's exec setup and a shell): what a session's idle
  // interpreter is held to must not grow with the daemon's own probing.
  uint64_t cpu_ms_besides_probes() const {
    return report_.cpu_ms > probe_allowance_ms_ ? report_.cpu_ms - probe_allowance_ms_ : 0;
  }
  // Counters by exec only, once per sandbox (later calls return at once): measures what one probe
  // costs here (reads back to back; on a slow or loaded machine far more than on a fast one, and
  // it drifts with the load: seen 20 ms to 70 ms) and allows twice that for each later probe.
  // Bounded both ways: never below kProbeCpuAllowanceMs, and a program spinning during the
  // measurement buys at most kMaxProbeCpuAllowanceMs per probe. Generous on purpose: the
  // allowance only lets an interpreter use that much CPU between two calls, where each call may
  // use the whole CPU limit.
  asio::awaitable<void> MeasureProbeCost();
  static constexpr uint64_t kProbeCpuAllowanceMs = 100;
  static constexpr uint64_t kMaxProbeCpuAllowanceMs = 300;
  uint64_t probe_cpu_allowance_ms() const { return per_probe_allowance_ms_; }
  bool read_once() const { return read_once_; }  // a Read got them
  // Known after the first Read: the container's cgroup on this host (none: by exec), and its PID
  // 1 as seen here (0: not looked up).
  const std::optional<HostCgroup>& host() const { return host_; }
  pid_t init_pid() const { return init_pid_; }

 private:
  asio::awaitable<void> FindHostCgroup();
  asio::awaitable<std::optional<CgroupCounters>> ProbeInContainer();

  Container c_;
  bool host_cgroups_;
  bool host_checked_ = false;
  std::optional<HostCgroup> host_;
  pid_t init_pid_ = 0;
  bool read_once_ = false;
  bool probe_cost_measured_ = false;
  uint64_t per_probe_allowance_ms_ = kProbeCpuAllowanceMs;
  uint64_t probe_allowance_ms_ = 0;  // the sum over the probe execs started
  uint64_t oom_kills_ = 0;
  ResourceReport report_;
};

}  // namespace ci::container
