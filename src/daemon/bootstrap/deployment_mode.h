// Which of the ways to run code-interpreter this process is in (docs/deployment.md "Deployment
// modes"), from facts of its host: the one place EXECUTOR_BACKEND=auto is decided.
#pragma once

#include <string>
#include <string_view>

#include "core/env_reader.h"

namespace ci::daemon {

enum class DeploymentMode {
  kHost,        // the local runtime on this host (a systemd service, a laptop, CI)
  kKubernetes,  // pods through the Kubernetes API of the cluster this pod runs in
  kDocker,      // an Engine named by DOCKER_HOST, or the host's own socket (not in a container)
  kDood,        // Docker-out-of-Docker: an Engine's socket mounted into this container
  kDind,        // Docker-in-Docker: a privileged container; the daemon runs its own dockerd
};

std::string_view DeploymentModeName(DeploymentMode mode);  // "host", "docker", "dind", ...
// The backend a mode runs on: "local", "kubernetes" or "docker".
std::string_view BackendOf(DeploymentMode mode);

// What detection looks at, gathered by HostFactsFromSystem (tests build them by hand).
struct HostFacts {
  bool in_cluster = false;    // KUBERNETES_SERVICE_HOST/PORT and the service account token
  std::string docker_host;    // DOCKER_HOST, when set
  std::string docker_socket;  // a unix socket where an Engine usually listens, when one exists
  bool in_container = false;  // /.dockerenv or /run/.containerenv
  std::string dockerd;        // the dockerd executable, when installed
  bool privileged = false;    // what dockerd needs: SYS_ADMIN, NET_ADMIN, ..., cgroups writable
};

// The socket looked for: /var/run/docker.sock, else (not root) $XDG_RUNTIME_DIR/docker.sock.
HostFacts HostFactsFromSystem(const EnvLookup& getenv);

struct Detection {
  DeploymentMode mode = DeploymentMode::kHost;
  std::string why;  // "KUBERNETES_SERVICE_HOST is set and a service account token is mounted"
};

// In order: a cluster, DOCKER_HOST, a mounted socket, Docker-in-Docker, else the host. An error
// when the facts point at a mode that cannot work (dockerd in an unprivileged container with no
// socket), naming what to change.
Result<Detection> DetectMode(const HostFacts& facts);

// The mode of an explicit EXECUTOR_BACKEND (no detection): local -> host, kubernetes ->
// kubernetes, docker -> dood in a container with no DOCKER_HOST, else docker.
DeploymentMode ModeOfBackend(std::string_view backend, const HostFacts& facts);

}  // namespace ci::daemon
