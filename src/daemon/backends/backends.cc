#include "daemon/backends/backends.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

#include "daemon/backends/local_options.h"
#include "docker/docker_executor.h"
#include "k8s/k8s_executor.h"
#include "runtime/daemon/host_probe.h"
#include "runtime/daemon/local_executor.h"

namespace ci::daemon {
namespace {

Result<std::unique_ptr<Executor>> MakeLocal(const Config& c, asio::any_io_executor ex,
                                            const BackendFacts&) {
  runtime::LocalExecutorOptions options = LocalOptionsFromConfig(c);
  if (Status s = runtime::CheckLocalRuntime(options); !s.ok()) {
    spdlog::error("local runtime check failed: {} (run `code-interpreter doctor` for details)",
                  s.message());
  }
  return runtime::MakeLocalExecutor(std::move(ex), options);
}

// The Engine is pinged and the image checked by the first health check; a missing image is
// pulled in the background (/health says so meanwhile) and watched every 60 s. An invalid
// DOCKER_* or PYTHON_EXECUTOR_DOCKER_* value stops startup.
Result<std::unique_ptr<Executor>> MakeDocker(const Config&, asio::any_io_executor ex,
                                             const BackendFacts& facts) {
  auto options = docker::DockerOptionsFromEnv([](const char* name) { return std::getenv(name); });
  if (!options.ok()) return options.status();
  options->engine_applies_limits = facts.docker_engine_applies_limits;
  spdlog::info("docker backend: engine {} image {} network {}", options->endpoint.Describe(),
               options->image, options->network);
  return docker::MakeDockerExecutor(std::move(ex), *options);
}

// The connection (KUBECONFIG, in-cluster, ~/.kube/config) and the pod options are read here; an
// invalid value stops startup. The API server is first asked by the first health check.
Result<std::unique_ptr<Executor>> MakeKubernetes(const Config&, asio::any_io_executor ex,
                                                 const BackendFacts&) {
  auto getenv = [](const char* name) { return std::getenv(name); };
  auto connection = k8s::ResolveKubeConfig(getenv);
  if (!connection.ok()) return connection.status();
  auto pods = k8s::K8sOptionsFromEnv(getenv);
  if (!pods.ok()) return pods.status();
  const char* ns = getenv("KUBERNETES_EXECUTOR_NAMESPACE");
  if (ns == nullptr || *ns == '\0') pods->namespace_ = connection->Namespace();
  spdlog::info("kubernetes backend: {} namespace {} image {}", connection->origin, pods->namespace_,
               pods->image);
  k8s::K8sExecutorOptions options;
  options.connection = std::move(*connection);
  options.pods = std::move(*pods);
  return k8s::MakeK8sExecutor(std::move(ex), std::move(options));
}

struct Backend {
  const char* name;
  Result<std::unique_ptr<Executor>> (*make)(const Config&, asio::any_io_executor,
                                            const BackendFacts&);
};
constexpr Backend kBackends[] = {
    {"local", MakeLocal}, {"docker", MakeDocker}, {"kubernetes", MakeKubernetes}};

}  // namespace

Result<std::unique_ptr<Executor>> MakeExecutor(const Config& config, asio::any_io_executor ex,
                                               const BackendFacts& facts) {
  std::string available;
  for (const Backend& b : kBackends) {
    if (config.executor_backend == b.name) return b.make(config, std::move(ex), facts);
    available += std::string(available.empty() ? "'" : ", '") + b.name + "'";
  }
  return Status::Error("EXECUTOR_BACKEND=" + config.executor_backend +
                       " is not available in this build yet; use " + available);
}

std::vector<BackendDoctorSection> BackendDoctorSections() {
  return {
      {"docker (informational, for EXECUTOR_BACKEND=docker)", runtime::ProbeDocker},
      {"kubernetes (informational, for EXECUTOR_BACKEND=kubernetes)", runtime::ProbeKubernetes}};
}

}  // namespace ci::daemon
