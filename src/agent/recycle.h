// Putting a container back as it started, between two executions (the agent's kRecycle): no
// process but the agent, nothing in its writable places, no System V IPC object. Each step checks
// its own result; any doubt is a refusal, and the daemon then removes the container instead.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace ci::agent {

// What a writable place looked like when the agent started (its owner and mode are restored).
struct WipeRoot {
  std::string path;
  mode_t mode = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Recorded by the agent before it runs anything.
std::vector<WipeRoot> RecordRoots(const std::vector<std::string>& paths, std::string* error);

// SIGKILLs every other process and reaps them all (the agent is PID 1, so orphans are its
// children too); false when some process was still there after a few seconds. `*spared`: a child
// of the agent (the fork server, zygote.h) left alone, or 0; set to 0 when it was reaped here
// (dead, its pid no longer names it). Only an unreaped child's pid is safe to go by.
bool KillAndReapEverything(std::string* error, pid_t* spared);

// Removes everything below each root and restores the root's mode; false with the reason when
// something is left.
bool WipeRoots(const std::vector<WipeRoot>& roots, std::string* error);

// Removes every System V shared memory segment, semaphore set and message queue of the
// container's IPC namespace; false when one is left.
bool RemoveSysvIpc(std::string* error);

// The writable mounts the wipe does not cover (tmpfs-like mounts the agent's user can write to
// outside `roots`, or a writable root file system): a container with any is never recycled.
std::vector<std::string> UncoveredWritableMounts(const std::vector<WipeRoot>& roots);

}  // namespace ci::agent
