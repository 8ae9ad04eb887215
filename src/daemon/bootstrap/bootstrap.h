// Startup before the backend exists (docs/architecture.md "Flow of one execution" starts after
// this): the deployment mode is detected or taken from EXECUTOR_BACKEND, Docker-in-Docker's
// nested dockerd is started and given the executor image, the Docker Engine is asked what it is
// (rootless or not), and the mode and its downgrades are logged and kept for /health.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <memory>
#include <string>

#include "core/status.h"
#include "daemon/api/deployment_info.h"
#include "daemon/bootstrap/nested_dockerd.h"
#include "daemon/config/config.h"

namespace ci::daemon {

struct Bootstrapped {
  std::string backend;  // "local", "docker" or "kubernetes": what MakeExecutor makes
  DeploymentInfo deployment;
  std::shared_ptr<NestedDockerd> dockerd;  // Docker-in-Docker only

  // /health's report, with the nested dockerd as it is now.
  DeploymentInfo Info() const;
};

// Docker-in-Docker reads DIND_DATA_ROOT, DIND_STORAGE_DRIVER, DIND_EXECUTOR_IMAGE_TAR and
// DIND_START_TIMEOUT_SEC (docs/deployment.md "Docker-in-Docker") and sets DOCKER_HOST to the nested
// dockerd's socket for the docker backend. An error stops startup.
asio::awaitable<Result<Bootstrapped>> Bootstrap(const Config& config,
                                                const std::string& executor_seccomp_json,
                                                asio::any_io_executor ex);

}  // namespace ci::daemon
