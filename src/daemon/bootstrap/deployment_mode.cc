#include "daemon/bootstrap/deployment_mode.h"

#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace ci::daemon {
namespace {

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

bool IsSocket(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

std::string Env(const EnvLookup& getenv, const char* name) {
  const char* v = getenv(name);
  return v != nullptr ? v : "";
}

// What a nested dockerd needs of a privileged container: the capabilities to build containers
// and a writable cgroup hierarchy (an unprivileged container's is read-only, so this tells a
// --cap-add SYS_ADMIN container from a privileged one).
bool Privileged() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  uint64_t effective = data[0].effective | (static_cast<uint64_t>(data[1].effective) << 32);
  for (int cap : {CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_SETPCAP, CAP_MKNOD, CAP_SYS_CHROOT}) {
    if (((effective >> cap) & 1) == 0) return false;
  }
  const bool v2 = Exists("/sys/fs/cgroup/cgroup.controllers");
  return ::access(v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory", W_OK) == 0;
}

}  // namespace

std::string_view DeploymentModeName(DeploymentMode mode) {
  switch (mode) {
    case DeploymentMode::kHost:
      return "host";
    case DeploymentMode::kKubernetes:
      return "kubernetes";
    case DeploymentMode::kDocker:
      return "docker";
    case DeploymentMode::kDood:
      return "dood";
    case DeploymentMode::kDind:
      return "dind";
  }
  return "host";
}

std::string_view BackendOf(DeploymentMode mode) {
  switch (mode) {
    case DeploymentMode::kHost:
      return "local";
    case DeploymentMode::kKubernetes:
      return "kubernetes";
    default:
      return "docker";
  }
}

HostFacts HostFactsFromSystem(const EnvLookup& getenv) {
  HostFacts f;
  f.in_cluster = !Env(getenv, "KUBERNETES_SERVICE_HOST").empty() &&
                 !Env(getenv, "KUBERNETES_SERVICE_PORT").empty() &&
                 Exists("/var/run/secrets/kubernetes.io/serviceaccount/token");
  f.docker_host = Env(getenv, "DOCKER_HOST");
  if (IsSocket("/var/run/docker.sock")) {
    f.docker_socket = "/var/run/docker.sock";
  } else if (std::string xdg = Env(getenv, "XDG_RUNTIME_DIR");
             ::geteuid() != 0 && !xdg.empty() && IsSocket(xdg + "/docker.sock")) {
    f.docker_socket = xdg + "/docker.sock";
  }
  f.in_container = Exists("/.dockerenv") || Exists("/run/.containerenv");
  for (const char* path : {"/usr/sbin/dockerd", "/usr/bin/dockerd", "/usr/local/bin/dockerd"}) {
    if (::access(path, X_OK) == 0) {
      f.dockerd = path;
      break;
    }
  }
  f.privileged = Privileged();
  return f;
}

Result<Detection> DetectMode(const HostFacts& f) {
  if (f.in_cluster) {
    return Detection{DeploymentMode::kKubernetes,
                     "KUBERNETES_SERVICE_HOST is set and a service account token is mounted"};
  }
  if (!f.docker_host.empty()) {
    return Detection{DeploymentMode::kDocker, "DOCKER_HOST=" + f.docker_host};
  }
  if (!f.docker_socket.empty()) {
    return Detection{f.in_container ? DeploymentMode::kDood : DeploymentMode::kDocker,
                     "a Docker socket is at " + f.docker_socket};
  }
  if (f.in_container && !f.dockerd.empty()) {
    if (!f.privileged) {
      return Status::Error(
          "EXECUTOR_BACKEND=auto: this container has " + f.dockerd +
          " but is not privileged, and no Docker socket is mounted. Run it with --privileged "
          "(Docker-in-Docker), or mount a Docker socket (-v /var/run/docker.sock:/var/run/"
          "docker.sock, the slim image), or set EXECUTOR_BACKEND");
    }
    return Detection{DeploymentMode::kDind,
                     "a privileged container with " + f.dockerd + " and no Docker socket"};
  }
  return Detection{DeploymentMode::kHost, "no cluster, no Docker Engine and no dockerd to start"};
}

DeploymentMode ModeOfBackend(std::string_view backend, const HostFacts& facts) {
  if (backend == "kubernetes") return DeploymentMode::kKubernetes;
  if (backend == "docker") {
    return facts.docker_host.empty() && facts.in_container ? DeploymentMode::kDood
                                                           : DeploymentMode::kDocker;
  }
  return DeploymentMode::kHost;
}

}  // namespace ci::daemon
