// A container whose PID 1 is the agent (src/agent): its execs are frames on the container's
// attach stream (agent_channel.h) instead of `docker exec`s; the pids limit, the host's view of
// PID 1, kill and removal are the Engine's, as for any container (or the Kubernetes backend's,
// for a pod: k8s_executor.cc gives its PodContainer as `engine`). An execution container may be
// recycled instead of removed: its agent puts it back as it started and it waits in the
// executor's RecycleBin for the next execution.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "container/agent_channel.h"
#include "container/container_api.h"
#include "container/recycle_bin.h"

namespace ci::container {

// A container's writable places (the spec's tmpfs mounts, Docker's own, a pod's emptyDirs and the
// runtime's /dev/shm): the agent's --wipe list, what it empties when it recycles the container
// and checks is all there is.
inline constexpr const char* kAgentWipes[] = {"/workspace", "/tmp", "/dev/shm", "/dev/mqueue"};

// Where and when an execution container goes back after its execution.
struct Recycling {
  std::shared_ptr<RecycleBin> bin;
  std::string key;                     // the configuration it was made for (RecycleBin::Take)
  std::shared_ptr<Removals> removals;  // recycles in flight count as removals (Drain waits)
  int64_t expires_at = 0;  // its code-interpreter.expires-at label: not put back near it
  uint32_t max_executions = 0;
  // A pod's: its cgroup is on another machine, so its processes are counted and its counters
  // read inside (kRecycledProbeScript, its own /sys/fs/cgroup), and its memory peak, read-only
  // there, is not reset (each execution reports the pod's peak so far).
  bool counters_inside = false;
};

// `engine` is the same container as the Engine sees it (engine_container.h); execs run as the
// agent's user (the container's) with `env` over the container's and in `cwd`. Without a bin in
// `recycling` (sessions, counters that cannot be made per execution) Remove removes.
std::shared_ptr<ContainerApi> MakeAgentContainer(std::string id,
                                                 std::shared_ptr<ContainerApi> engine,
                                                 std::shared_ptr<AgentChannel> channel,
                                                 std::vector<std::string> env, std::string cwd,
                                                 Recycling recycling);

}  // namespace ci::container
