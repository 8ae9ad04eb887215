// The Docker backend's options and their reading from the environment
// (PYTHON_EXECUTOR_DOCKER_* and the docker CLI's DOCKER_* variables).
#pragma once

#include <chrono>
#include <string>

#include "core/env_reader.h"
#include "core/status.h"
#include "docker/container_config.h"
#include "docker/endpoint.h"

namespace ci::docker {

struct DockerExecutorOptions {
  Endpoint endpoint;
  std::string image = "code-interpreter-executor:latest";  // normalised
  std::string network = "none";
  RunArgs extra;
  std::chrono::milliseconds api_timeout{30000};  // every Engine call but the program's stream
  std::chrono::seconds container_ttl{3600};      // code-interpreter.expires-at = now + this
  // With a local Engine (unix socket, the container's PID 1 visible here) its cgroup counters
  // are read from the host; false forces the in-container exec probe (a remote Engine's way).
  bool host_cgroups = true;
  // false: the Engine has no cgroup driver (rootless on cgroup v1, bootstrap asks its /info); it
  // accepts memory, pids and CPU limits and applies none, so they are reported as downgrades.
  bool engine_applies_limits = true;
  // Containers of an image that carries the agent (src/agent) run it as PID 1 and are driven
  // over their attach stream (PYTHON_EXECUTOR_DOCKER_AGENT, on by default); images without it,
  // and `false`, get a `docker exec` per step. Session containers stay exec-driven either way
  // (src/agent/README.md "Sessions").
  bool agent = true;
  // With the agent: recycled execution containers keep a Python fork server
  // (SandboxSpec::zygote_argv, src/agent/python_fork_server.h) and fork each program from it
  // (PYTHON_EXECUTOR_DOCKER_FORK_SERVER, on by default; `false`: a Python start per program).
  bool fork_server = true;
  // The image watchdog's period (0: none; each Check inspects, and pulls, itself) and the pull's
  // bounds (image_watch.h).
  std::chrono::milliseconds image_check_period{60000};
  std::chrono::milliseconds pull_timeout{30 * 60 * 1000};
  std::chrono::milliseconds pull_idle_timeout{120 * 1000};
};

// PYTHON_EXECUTOR_DOCKER_IMAGE, PYTHON_EXECUTOR_DOCKER_NETWORK, PYTHON_EXECUTOR_DOCKER_AGENT,
// PYTHON_EXECUTOR_DOCKER_RUN_ARGS, PYTHON_EXECUTOR_DOCKER_PULL_TIMEOUT_SEC,
// PYTHON_EXECUTOR_DOCKER_IMAGE_CHECK_INTERVAL_SEC and the DOCKER_* variables; an invalid value is
// an error naming the variable.
Result<DockerExecutorOptions> DockerOptionsFromEnv(const EnvLookup& getenv);

}  // namespace ci::docker
