// SandboxSpec -> the ContainerCreate body (wire-protocols.md A.2), as a pure function tested
// against golden JSON, and the PYTHON_EXECUTOR_DOCKER_RUN_ARGS subset it may add to.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/measure.h"
#include "core/sandbox_spec.h"
#include "core/status.h"

namespace ci::docker {

struct Ulimit {
  std::string name;
  int64_t soft = 0;
  int64_t hard = 0;
};

// What PYTHON_EXECUTOR_DOCKER_RUN_ARGS may add: `--label/-l K=V`, `--env/-e K=V`,
// `--add-host H:IP`, `--dns IP`, `--ulimit NAME=SOFT[:HARD]` (also `--flag=value`).
struct RunArgs {
  std::map<std::string, std::string> labels;
  std::vector<std::string> env;
  std::vector<std::string> extra_hosts;
  std::vector<std::string> dns;
  std::vector<Ulimit> ulimits;  // override ours of the same name
};

// Splits with shell-like quoting ('...', "..." with \" \\ \$ \`, backslash escapes) and parses
// the flags above; any other flag is an error naming it.
Result<RunArgs> ParseRunArgs(std::string_view text);

// Splits a string like a POSIX shell would (no expansions).
Result<std::vector<std::string>> ShellSplit(std::string_view text);

struct ContainerOptions {
  std::string image;                   // normalised reference
  std::string network = "none";        // HostConfig.NetworkMode
  std::string component = "executor";  // label component=executor|session
  int64_t expires_at = 0;              // unix seconds, label code-interpreter.expires-at
  std::vector<std::string> cmd;        // PID 1, a process that only waits, or the agent
  // PID 1 is the agent (src/agent): its stdin stays open for the daemon's attach stream, and
  // nothing is logged (its stdout carries the programs' output).
  bool agent = false;
  // Sessions: no container-wide RLIMIT_CPU (cpu=-1); each run's wrapper sets the program's own,
  // so a background program (a persistent interpreter) is not killed by the sum of its calls.
  bool cpu_rlimit_per_run = false;
  RunArgs extra;
};

// The labels every container of ours carries (the reaper's filter).
inline constexpr const char* kAppLabel = "app";
inline constexpr const char* kAppValue = "code-interpreter";
inline constexpr const char* kComponentLabel = "component";
inline constexpr const char* kExpiresLabel = "code-interpreter.expires-at";

// The ContainerCreate body as values: what dockerd is asked to apply. Built from the spec once;
// the JSON sent and the enforcement report are both read from it.
struct ContainerCreate {
  std::string image;
  std::vector<std::string> cmd;
  bool agent = false;  // ContainerOptions::agent
  std::string user;    // "uid:gid"
  std::string working_dir;
  std::string hostname;
  std::vector<std::string> env;
  std::map<std::string, std::string> labels;
  bool network_disabled = true;
  // HostConfig
  std::string network_mode = "none";
  std::vector<std::string> cap_drop;
  std::vector<std::string> security_opt;  // "no-new-privileges", "seccomp=<profile JSON>"
  int64_t pids_limit = 0;
  int64_t memory = 0;
  int64_t memory_swap = 0;  // memory + swap: equal to memory means no swap
  // CFS bandwidth, CpuQuota µs of CPU per CpuPeriod µs (0, 0: no cap). Not NanoCpus, which
  // dockerd refuses above the host's CPU count; the local runtime's cpu.max has no such bound.
  int64_t cpu_period = 0;
  int64_t cpu_quota = 0;
  std::vector<Ulimit> ulimits;
  std::map<std::string, std::string> tmpfs;  // mount point -> options
  bool readonly_rootfs = true;
  std::vector<std::string> masked_paths;  // /dev/null or an empty tmpfs over each
  std::vector<std::string> readonly_paths;
  std::vector<std::string> extra_hosts;
  std::vector<std::string> dns;
  // Sessions: RLIMIT_CPU set by each run's wrapper instead of a container-wide ulimit.
  bool cpu_rlimit_per_run = false;
  uint32_t cpu_time_per_run_sec = 0;
  std::string seccomp_profile_name;  // the spec's, for the report ("default")
  bool seccomp_log_only = false;  // SECCOMP_LOG_DENIED: the profile's denials became SCMP_ACT_LOG
};

ContainerCreate ContainerCreateFromSpec(const SandboxSpec& spec, const ContainerOptions& options);
// Compact JSON, members in a fixed order (golden-testable).
std::string ContainerCreateJson(const ContainerCreate& body);
std::string ContainerCreateJson(const SandboxSpec& spec, const ContainerOptions& options);
// The OCI seccomp profile with every action but SCMP_ACT_ALLOW (default and rules) turned into
// SCMP_ACT_LOG: allowed and logged by the kernel audit, as the local runtime's log mode.
std::string LogOnlySeccompProfile(std::string_view profile_json);
// What dockerd applies to a container created with `body` (with the per-run wrapper's RLIMIT_CPU
// for sessions): its part of the backend's Enforcement.
std::vector<Measure> ContainerMeasures(const ContainerCreate& body);

// "python" -> "python:latest"; "reg:5000/a/b" -> "reg:5000/a/b:latest"; tags and digests kept.
std::string NormalizeImageRef(std::string_view ref);

}  // namespace ci::docker
