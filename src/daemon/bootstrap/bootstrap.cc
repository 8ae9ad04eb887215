#include "daemon/bootstrap/bootstrap.h"

#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cstdlib>

#include "core/env_reader.h"
#include "daemon/bootstrap/cgroup_nesting.h"
#include "daemon/bootstrap/deployment_mode.h"
#include "daemon/bootstrap/dind_image.h"
#include "docker/docker_options.h"
#include "docker/engine_client.h"
#include "docker/engine_info.h"

namespace ci::daemon {
namespace {

using namespace std::chrono_literals;

const char* Getenv(const char* name) { return std::getenv(name); }

struct DindOptions {
  DockerdSettings settings;
  std::string executor_image_tar = "/usr/share/code-interpreter/executor-image.tar";
  uint32_t start_timeout_sec = 60;
};

Result<DindOptions> DindOptionsFromEnv(const std::string& dockerd, bool executor_network) {
  DindOptions o;
  o.settings.dockerd = dockerd;
  o.settings.executor_network = executor_network;
  EnvLookup getenv = Getenv;  // EnvReader keeps a reference
  EnvReader env(getenv);
  env.String("DIND_DATA_ROOT", o.settings.data_root);
  env.Choice("DIND_STORAGE_DRIVER", o.settings.storage_driver, {"overlay2", "vfs"});
  env.String("DIND_EXECUTOR_IMAGE_TAR", o.executor_image_tar);
  env.Int("DIND_START_TIMEOUT_SEC", o.start_timeout_sec, 1, 3600);
  env.Bool("DIND_USERNS_REMAP", o.settings.userns_remap);
  if (!env.error().ok()) return env.error();
  return o;
}

// dockerd looks for AppArmor and its own privileges in securityfs (the dind entrypoint mounts it).
void MountSecurityfs() {
  struct stat dir {
  }, parent{};
  if (::stat("/sys/kernel/security", &dir) != 0 || ::stat("/sys/kernel", &parent) != 0) return;
  if (dir.st_dev != parent.st_dev) return;  // already a mount of its own
  if (::mount("none", "/sys/kernel/security", "securityfs", 0, nullptr) != 0) {
    spdlog::warn(
        "could not mount securityfs on /sys/kernel/security: AppArmor detection in the "
        "nested dockerd may fail");
  }
}

asio::awaitable<Result<std::shared_ptr<NestedDockerd>>> StartDind(
    const HostFacts& facts, const std::string& executor_seccomp_json, asio::any_io_executor ex,
    std::vector<Downgrade>& downgrades) {
  auto docker_options = docker::DockerOptionsFromEnv(Getenv);
  if (!docker_options.ok()) co_return docker_options.status();
  auto options = DindOptionsFromEnv(facts.dockerd, docker_options->network != "none");
  if (!options.ok()) co_return options.status();
  auto hardening = PrepareDockerdHardening();
  if (!hardening.ok()) co_return hardening.status();
  MountSecurityfs();
  if (auto nesting = EnableCgroupNesting(); !nesting.ok()) {
    downgrades.push_back({"cgroup limits of executors in the nested dockerd",
                          nesting.status().message(), "run the container with --privileged"});
  } else if (nesting->version == "2") {
    // With the host's cgroup namespace, dockerd's default parent (/docker) is the top of the
    // host's hierarchy: its containers would leave this container's cgroup and its limits.
    if (!nesting->own_cgroup.empty() && nesting->own_cgroup != "/") {
      options->settings.cgroup_parent = nesting->own_cgroup + "/docker";
    }
    spdlog::info("cgroup v2: controllers enabled below {} for the nested dockerd: {}",
                 nesting->own_cgroup.empty() ? "(unknown)" : nesting->own_cgroup,
                 nesting->controllers.empty() ? "(none)" : nesting->controllers);
  }
  auto dockerd = std::make_shared<NestedDockerd>(ex, options->settings, std::move(*hardening),
                                                 executor_seccomp_json);
  Status started = co_await dockerd->Start(std::chrono::seconds(options->start_timeout_sec));
  if (!started.ok()) co_return Status::Error("Docker-in-Docker: " + started.message());
  for (const Downgrade& d : dockerd->downgrades()) downgrades.push_back(d);
  const std::string socket = DockerdSocket(dockerd->settings());
  ::setenv("DOCKER_HOST", ("unix://" + socket).c_str(), 1);
  Status image =
      co_await EnsureExecutorImage(ex, socket, docker_options->image, options->executor_image_tar);
  if (!image.ok()) {
    spdlog::error("Docker-in-Docker: {}", image.message());
  }
  co_return dockerd;
}

// Asks the Engine what it is; a rootful Engine reached from outside is a downgrade (an escape
// from a container is root on that host).
asio::awaitable<std::optional<EngineSummary>> DescribeEngine(asio::any_io_executor ex,
                                                             DeploymentMode mode,
                                                             std::vector<Downgrade>& downgrades) {
  auto options = docker::DockerOptionsFromEnv(Getenv);
  if (!options.ok()) co_return std::nullopt;  // MakeExecutor reports the setting
  EngineSummary engine;
  engine.endpoint = options->endpoint.Describe();
  docker::EngineClient client(ex, options->endpoint, 5s);
  Status ping = co_await client.Negotiate();
  Result<docker::EngineInfo> info = ping;
  if (ping.ok()) info = co_await docker::FetchEngineInfo(client);
  if (!info.ok()) {
    spdlog::warn("deployment: could not ask the Docker Engine what it is: {}",
                 info.status().message());
    engine.error = info.status().message();
    co_return engine;
  }
  engine.version = info->server_version;
  engine.rootless = info->rootless;
  engine.cgroup_version = info->cgroup_version;
  engine.storage_driver = info->storage_driver;
  for (const std::string& o : info->security_options) engine.userns_remap |= o == "userns";
  spdlog::info("deployment: Docker Engine {} at {} ({}, cgroup v{}, storage {})", engine.version,
               engine.endpoint, engine.rootless ? "rootless" : "rootful", engine.cgroup_version,
               engine.storage_driver);
  if (!engine.rootless && mode != DeploymentMode::kDind) {
    downgrades.push_back(
        {"rootless Docker Engine",
         "the Engine at " + engine.endpoint +
             " runs as root: whoever escapes a container, or reaches its socket, is root on "
             "that host",
         "give the daemon a rootless dockerd's socket (docs/deployment.md \"Docker-out-of-"
         "Docker with a rootless socket\")"});
  }
  // A rootless Engine on cgroup v1 has no cgroup driver: it accepts limits and applies none
  // (the docker backend then reports them as downgrades).
  engine.applies_limits = info->cgroup_driver != "none";
  co_return engine;
}

}  // namespace

DeploymentInfo Bootstrapped::Info() const {
  DeploymentInfo info = deployment;
  if (dockerd) {
    NestedDockerdReport r = dockerd->Report();
    NestedDockerdInfo n;
    n.pid = r.pid;
    n.answering = r.answering;
    n.restarts = r.restarts;
    n.storage_driver = r.storage_driver;
    n.last_exit = r.last_exit;
    if (r.security_read) {
      n.seccomp_mode = r.security.seccomp_mode;
      n.cap_bounding = r.security.cap_bounding;
      n.cap_effective = r.security.cap_effective;
    }
    n.dropped_capabilities = r.dropped_capabilities;
    info.nested_dockerd = std::move(n);
  }
  return info;
}

asio::awaitable<Result<Bootstrapped>> Bootstrap(const Config& config,
                                                const std::string& executor_seccomp_json,
                                                asio::any_io_executor ex) {
  HostFacts facts = HostFactsFromSystem(Getenv);
  Detection detection;
  if (config.executor_backend == "auto") {
    auto detected = DetectMode(facts);
    if (!detected.ok()) co_return detected.status();
    detection = *detected;
  } else {
    detection = {ModeOfBackend(config.executor_backend, facts),
                 "EXECUTOR_BACKEND=" + config.executor_backend};
  }
  Bootstrapped b;
  b.backend = std::string(BackendOf(detection.mode));
  b.deployment.mode = std::string(DeploymentModeName(detection.mode));
  b.deployment.detected = detection.why;
  spdlog::info("deployment mode: {} ({}): backend {}", b.deployment.mode, detection.why, b.backend);
  if (detection.mode == DeploymentMode::kDind) {
    auto dockerd = co_await StartDind(facts, executor_seccomp_json, ex, b.deployment.downgrades);
    if (!dockerd.ok()) co_return dockerd.status();
    b.dockerd = *dockerd;
  }
  if (b.backend == "docker") {
    b.deployment.engine = co_await DescribeEngine(ex, detection.mode, b.deployment.downgrades);
  }
  co_return b;
}

}  // namespace ci::daemon
