// SandboxSpec -> the ContainerCreate body (wire-protocols.md A.2), as a pure function tested
// against golden JSON, and the PYTHON_EXECUTOR_DOCKER_RUN_ARGS subset it may add to.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

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
  std::vector<std::string> cmd;        // PID 1, a process that only waits
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

// Compact JSON, members in a fixed order (golden-testable).
std::string ContainerCreateJson(const SandboxSpec& spec, const ContainerOptions& options);

// "python" -> "python:latest"; "reg:5000/a/b" -> "reg:5000/a/b:latest"; tags and digests kept.
std::string NormalizeImageRef(std::string_view ref);

}  // namespace ci::docker
