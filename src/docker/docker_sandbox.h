// One container's sandbox (the Sandbox of core/executor.h): a program's run under its wrapper, a
// session's background programs and interpreter calls, Collect, Destroy and Kill, each a few
// named steps over the pieces of this directory. README "One execution" and "Sessions".
#pragma once

#include <cstddef>
#include <memory>

#include "core/executor.h"
#include "docker/container_exec.h"

namespace ci::docker {

// Container removals in flight: Destroy does not wait for them, DockerExecutor::Drain does.
struct Removals {
  size_t in_flight = 0;
};

// The sandbox of the created (not yet started) container `c`; its Destroy removes the container
// in the background, counted in `removals`. host_cgroups: DockerExecutorOptions::host_cgroups.
std::unique_ptr<Sandbox> MakeDockerSandbox(Container c, bool host_cgroups,
                                           std::shared_ptr<Removals> removals);

}  // namespace ci::docker
