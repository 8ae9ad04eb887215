#include "docker/docker_options.h"

#include <unistd.h>

namespace ci::docker {

Result<DockerExecutorOptions> DockerOptionsFromEnv(const EnvLookup& getenv) {
  DockerExecutorOptions o;
  auto endpoint =
      ResolveEndpoint(getenv, [](const std::string& p) { return ::access(p.c_str(), F_OK) == 0; });
  if (!endpoint.ok()) return endpoint.status();
  o.endpoint = *endpoint;
  auto get = [&](const char* n) {
    const char* v = getenv(n);
    return v == nullptr ? std::string() : std::string(v);
  };
  if (std::string image = get("PYTHON_EXECUTOR_DOCKER_IMAGE"); !image.empty()) {
    o.image = NormalizeImageRef(image);
  }
  if (std::string net = get("PYTHON_EXECUTOR_DOCKER_NETWORK"); !net.empty()) {
    if (net == "host" || net.rfind("container:", 0) == 0) {
      return Status::Error("invalid environment variable PYTHON_EXECUTOR_DOCKER_NETWORK='" + net +
                           "': host and container networks are not allowed for sandboxes");
    }
    o.network = net;
  }
  EnvReader env(getenv);
  int64_t pull_sec = -1, check_sec = -1;
  env.Int("PYTHON_EXECUTOR_DOCKER_PULL_TIMEOUT_SEC", pull_sec, 1, 86400);
  env.Int("PYTHON_EXECUTOR_DOCKER_IMAGE_CHECK_INTERVAL_SEC", check_sec, 1, 86400);
  env.Bool("PYTHON_EXECUTOR_DOCKER_AGENT", o.agent);
  env.Bool("PYTHON_EXECUTOR_DOCKER_FORK_SERVER", o.fork_server);
  if (!env.error().ok()) return env.error();
  if (pull_sec > 0) o.pull_timeout = std::chrono::seconds(pull_sec);
  if (check_sec > 0) o.image_check_period = std::chrono::seconds(check_sec);
  auto extra = ParseRunArgs(get("PYTHON_EXECUTOR_DOCKER_RUN_ARGS"));
  if (!extra.ok()) return extra.status();
  o.extra = *extra;
  return o;
}

}  // namespace ci::docker
