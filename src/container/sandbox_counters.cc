#include "container/sandbox_counters.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "agent/agent_wire.h"

namespace ci::container {

uint64_t HostCpuMs(const HostCgroup& host) {
  return ParseCgroupFiles(ReadHostCgroupFiles(host)).cpu_ms;
}

asio::awaitable<void> SandboxCounters::Read(bool kill_leftovers) {
  if (!host_checked_) {
    host_checked_ = true;
    co_await FindHostCgroup();
  }
  CgroupCounters counters;
  if (host_) {
    bool killed = !kill_leftovers || KillHostCgroupProcesses(*host_, init_pid_, c_.id);
    counters = ParseCgroupFiles(ReadHostCgroupFiles(*host_));
    if (!killed) {
      spdlog::debug("{}: could not kill leftovers from the host, using an exec", c_.short_id());
      co_await ProbeInContainer(true);
    }
  } else {
    auto probed = co_await ProbeInContainer(kill_leftovers);
    if (!probed) co_return;
    counters = *probed;
  }
  counters = SinceBaseline(counters, c_.baseline);
  read_once_ = true;
  report_.oom_killed = report_.oom_killed || counters.oom_killed;
  oom_kills_ = std::max(oom_kills_, counters.oom_kills);
  report_.pids_limit_hit = report_.pids_limit_hit || counters.pids_limit_hit;
  if (counters.has_cpu) report_.cpu_ms = counters.cpu_ms;
  if (counters.has_processes_cpu) processes_cpu_ms_ = counters.processes_cpu_ms;
  if (counters.memory_peak_bytes > 0) report_.memory_peak_bytes = counters.memory_peak_bytes;
}

// A unix socket may still lead to an Engine elsewhere (a VM): the container's PID 1 must be
// visible here with a cgroup naming the container.
asio::awaitable<std::optional<HostCgroup>> LocateHostCgroup(ContainerApi& api,
                                                            const std::string& container_id,
                                                            pid_t* init_pid) {
  *init_pid = co_await api.HostInitPid();
  if (*init_pid <= 0) co_return std::nullopt;
  auto slurp = [](const std::string& file) {
    std::ifstream in(file);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  std::string own = slurp("/proc/" + std::to_string(*init_pid) + "/cgroup");
  std::string mountinfo = slurp("/proc/self/mountinfo");
  HostCgroup cg;
  std::string why;
  if (FindContainerCgroup(own, mountinfo, container_id, &cg, &why)) co_return cg;
  spdlog::debug("{}: cgroup not readable from here ({}), counters by exec",
                container_id.substr(0, 12), why);
  co_return std::nullopt;
}

asio::awaitable<void> SandboxCounters::FindHostCgroup() {
  if (!host_cgroups_) co_return;
  host_ = co_await LocateHostCgroup(*c_.api, c_.id, &init_pid_);
}

// The in-container probe (kill leftovers, print the counter files). When it cannot start (the
// pids limit is full of a fork bomb's processes), the limit is raised a little through the
// Engine's update call for the probe's own processes and it is tried again.
asio::awaitable<std::optional<CgroupCounters>> SandboxCounters::ProbeInContainer(bool kill) {
  // Read by the container's agent itself where it can (no process, no free pid needed), after
  // its kill of the leftovers (frames are handled in order).
  if (!kill || c_.session || c_.api->KillAllBut(nullptr)) {
    const uint8_t extras = c_.session ? agent::kProcessesCpu : 0;
    auto read = co_await c_.api->ReadCounters(extras);
    if (read && read->ok()) co_return ParseCgroupFiles(SplitProbeOutput(**read));
    if (read) {
      spdlog::warn("{}: cgroup counters: {}", c_.short_id(), read->status().message());
      co_return std::nullopt;
    }
  }
  // Sessions: no kill here, background programs live on (each run's wrapper killed the rest).
  // Nor after a forked program: the agent killed its leftovers, sparing the fork server.
  const char* script = c_.session ? kInContainerCountersScript
                       : kill     ? kInContainerProbeScript
                                  : kInContainerReadScript;
  const std::vector<std::string> cmd = {"/bin/sh", "-c", script};
  CaptureOptions stdout_only;
  stdout_only.output_cap = 4 * kMaxErrorText;
  stdout_only.stdout_only = true;
  std::string why;
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (attempt > 0) {
      bool raised = co_await c_.api->SetPidsHeadroom(attempt);
      if (!raised) spdlog::debug("{}: raising the pids limit failed", c_.short_id());
    }
    auto probe = co_await CaptureExec(c_, cmd, stdout_only);
    if (!probe.ok()) {
      why = probe.status().message();
      continue;
    }
    auto& code = probe->exit_code;
    if (probe->read.ok() && code.ok() && code->has_value() && **code == 0) {
      co_return ParseCgroupFiles(SplitProbeOutput(probe->output));
    }
    why = !probe->read.ok() ? probe->read.message()
          : !code.ok()      ? code.status().message()
                            : "exit status " +
                             (code->has_value() ? std::to_string(**code) : std::string("unknown"));
  }
  spdlog::warn("{}: cgroup probe failed: {}", c_.short_id(), why);
  co_return std::nullopt;
}

}  // namespace ci::container
