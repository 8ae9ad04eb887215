// Putting a sandbox's writable places and IPC back as they started, between two executions: the
// pieces shared by the two PID 1s that recycle sandboxes (the Docker agent, src/agent/recycle.h,
// and the local runtime's init). Each step checks its own result; any doubt is a refusal, and
// the daemon then removes the sandbox instead. Exception-free.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace ci {

// What a writable place looked like when the agent started (its owner and mode are restored).
struct WipeRoot {
  std::string path;
  mode_t mode = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Recorded by the agent before it runs anything.
std::vector<WipeRoot> RecordRoots(const std::vector<std::string>& paths, std::string* error);

// True when /proc lists no process but this one and `spared` (0: none).
bool OnlyThisProcessLeft(pid_t spared);

// Removes everything below each root and restores the root's mode; false with the reason when
// something is left.
bool WipeRoots(const std::vector<WipeRoot>& roots, std::string* error);

// Removes every System V shared memory segment, semaphore set and message queue of the
// container's IPC namespace; false when one is left.
bool RemoveSysvIpc(std::string* error);

// The writable mounts the wipe does not cover (tmpfs-like mounts the agent's user can write to
// outside `roots`, or a writable root file system): a container with any is never recycled.
std::vector<std::string> UncoveredWritableMounts(const std::vector<WipeRoot>& roots);

}  // namespace ci
