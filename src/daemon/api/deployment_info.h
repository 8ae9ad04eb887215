// How this daemon is deployed, as /health's `deployment` shows it (docs/deployment.md
// "Deployment modes"): the mode bootstrap chose and why, the Docker Engine it talks to, the
// nested dockerd it runs (Docker-in-Docker), and the deployment's own downgrades.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/measure.h"

namespace ci::daemon {

struct EngineSummary {
  std::string endpoint;  // "unix:///var/run/docker.sock"
  std::string version;   // "" when the Engine did not answer at startup
  bool rootless = false;
  std::string cgroup_version;
  std::string storage_driver;
  std::string error;           // why the Engine could not be asked at startup ("" when it was)
  bool applies_limits = true;  // it has a cgroup driver
  bool userns_remap = false;   // its containers are in a user namespace (SecurityOptions "userns")
};

struct NestedDockerdInfo {
  int64_t pid = 0;         // 0 while it is not running
  bool answering = false;  // /health is an error while it is not
  int restarts = 0;
  std::string storage_driver;
  std::string last_exit;
  int seccomp_mode = -1;       // /proc/PID/status Seccomp: 2 is a filter
  uint64_t cap_bounding = 0;   // /proc/PID/status CapBnd
  uint64_t cap_effective = 0;  // /proc/PID/status CapEff
  std::vector<std::string> dropped_capabilities;
};

struct DeploymentInfo {
  std::string mode = "host";  // host, kubernetes, docker, dood, dind
  std::string detected;       // why: "a Docker socket is at /var/run/docker.sock", or
                              // "EXECUTOR_BACKEND=docker"
  std::optional<EngineSummary> engine;
  std::optional<NestedDockerdInfo> nested_dockerd;
  std::vector<Downgrade> downgrades;
};

}  // namespace ci::daemon
