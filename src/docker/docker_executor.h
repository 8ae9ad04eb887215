// EXECUTOR_BACKEND=docker: one container per execution on a Docker Engine reached over its HTTP
// API (no docker CLI). See README.md in this directory for the lifecycle and the kill design.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <memory>

#include "core/executor.h"
#include "docker/docker_options.h"

namespace ci::docker {

std::unique_ptr<Executor> MakeDockerExecutor(asio::any_io_executor ex, DockerExecutorOptions opts);

}  // namespace ci::docker
