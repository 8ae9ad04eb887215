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
  // What a session's idle interpreter is held to: the CPU time of the sandbox's processes as last
  // read. On the host, the cgroup's; by exec, the probe's sum over the processes it sees (the
  // cgroup's would include the probes' own CPU, which grows several times over on a loaded
  // virtual machine: 20 to 110 ms a probe seen).
  uint64_t processes_cpu_ms() const { return host_ ? report_.cpu_ms : processes_cpu_ms_; }
  bool read_once() const { return read_once_; }  // a Read got them
  // Known after the first Read: the container's cgroup on this host (none: by exec), and its PID
  // 1 as seen here (0: not looked up).
  const std::optional<HostCgroup>& host() const { return host_; }
  pid_t init_pid() const { return init_pid_; }

 private:
  asio::awaitable<void> FindHostCgroup();
  // `kill`: the leftovers of an execution (not a session's) first.
  asio::awaitable<std::optional<CgroupCounters>> ProbeInContainer(bool kill);

  Container c_;
  bool host_cgroups_;
  bool host_checked_ = false;
  std::optional<HostCgroup> host_;
  pid_t init_pid_ = 0;
  bool read_once_ = false;
  uint64_t processes_cpu_ms_ = 0;
  uint64_t oom_kills_ = 0;
  ResourceReport report_;
};

}  // namespace ci::container
