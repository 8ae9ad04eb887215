// Makes the container's cgroups usable by a nested dockerd (Docker-in-Docker).
//
// cgroup v2: a cgroup that holds processes cannot enable controllers for its children (the "no
// internal processes" rule: writing cgroup.subtree_control fails with EBUSY). In a container with
// its own cgroup namespace, this container's processes sit in the namespace's root, so they are
// moved into a child "init" first, then every available controller is enabled for the children
// — what the docker:dind entrypoint does.
// cgroup v1: nothing to move; the hierarchies only need to be writable (a privileged container).
#pragma once

#include <string>

#include "core/status.h"

namespace ci::daemon {

struct CgroupNesting {
  std::string version;      // "2" or "1"
  std::string controllers;  // v2: what was enabled for the children ("cpu io memory pids")
  // v2 without a cgroup namespace of its own (--cgroupns=host): this container's cgroup as the
  // host names it ("/system.slice/docker-<id>.scope"). The nested dockerd's cgroupfs driver
  // then makes its containers' cgroups at the top of the host's hierarchy (/docker/<id>),
  // outside this one and its limits: a downgrade. Empty otherwise.
  std::string outside_cgroup;
};

// `root` is the mount point and `self_cgroup` this process's /proc/self/cgroup (tests give
// others). Processes are moved only when this process is at the root of its own cgroup
// namespace ("0::/"). An error says what is not writable or which write failed.
Result<CgroupNesting> EnableCgroupNesting(const std::string& root = "/sys/fs/cgroup",
                                          const std::string& self_cgroup = "/proc/self/cgroup");

}  // namespace ci::daemon
