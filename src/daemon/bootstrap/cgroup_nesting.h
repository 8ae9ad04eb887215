// Makes the container's cgroups usable by a nested dockerd (Docker-in-Docker).
//
// cgroup v2: a cgroup that holds processes cannot enable controllers for its children (the "no
// internal processes" rule: writing cgroup.subtree_control fails with EBUSY). In a container with
// its own cgroup namespace, this container's processes sit in the namespace's root, so they are
// moved into a child "init" first, then every available controller is enabled for the children
// — what the docker:dind entrypoint does. With the host's namespace the same is done in the
// container's own cgroup (the entrypoint would move the host root's processes instead).
// cgroup v1: nothing to move; the hierarchies only need to be writable (a privileged container).
#pragma once

#include <string>

#include "core/status.h"

namespace ci::daemon {

struct CgroupNesting {
  std::string version;      // "2" or "1"
  std::string controllers;  // v2: what was enabled for the children ("cpu io memory pids")
  // v2: this process's cgroup as /proc/self/cgroup names it, where the controllers were
  // enabled: "/" in a cgroup namespace of its own (Docker's default on v2); with the host's
  // (--cgroupns=host) the container's cgroup ("/system.slice/docker-<id>.scope"), under which
  // the nested dockerd must then be told to put its containers (its cgroupfs driver's default,
  // /docker, would be the top of the host's hierarchy, outside this container and its limits).
  std::string own_cgroup;
};

// `root` is the mount point and `self_cgroup` this process's /proc/self/cgroup (tests give
// others). The processes moved into "init" are those of this process's own cgroup (the
// namespace's root, or the container's cgroup with the host's namespace). An error says what is
// not writable or which write failed.
Result<CgroupNesting> EnableCgroupNesting(const std::string& root = "/sys/fs/cgroup",
                                          const std::string& self_cgroup = "/proc/self/cgroup");

}  // namespace ci::daemon
