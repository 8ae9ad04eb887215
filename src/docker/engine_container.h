// A Docker container as the exec-driven sandbox drives it (container_api.h), over the Engine API
// (wire-protocols.md A.2-A.4): execs created and started with hijacked streams in the stdcopy
// framing, exit codes from exec inspect, the pids limit raised by the update call, and removal
// with force in the background.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "container/container_api.h"
#include "docker/engine_client.h"

namespace ci::docker {

struct EngineContainerInfo {
  std::string id;
  std::string user;  // "uid:gid"
  std::string cwd;
  std::vector<std::string> env;
  uint32_t pids_limit = 0;
  // Counters from the host when the Engine is local (DockerExecutorOptions::host_cgroups).
  bool host_cgroups = false;
};

std::shared_ptr<container::ContainerApi> MakeEngineContainer(
    asio::any_io_executor ex, std::shared_ptr<EngineClient> client, EngineContainerInfo info,
    std::shared_ptr<container::Removals> removals);

}  // namespace ci::docker
