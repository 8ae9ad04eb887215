// Starts `<shim_binary> shim` with the fixed descriptor layout of sandbox_init.h. The daemon is
// multi-threaded, so it never forks into namespace setup itself: posix_spawn (vfork + exec) is
// the only thing that runs in the child.
#pragma once

#include <spawn.h>
#include <sys/types.h>

#include <string>

#include "core/status.h"
#include "runtime/kernel/unique_fd.h"

namespace ci::runtime {

struct ShimHandles {
  pid_t pid = -1;      // 0: the fork server's zygote is the sandbox's parent (no shim process)
  UniqueFd pidfd;      // readable once the shim exited; none without a shim
  UniqueFd lifecycle;  // fd 3 in the shim
  UniqueFd service;    // fd 4 in the shim, then in init
  UniqueFd stdin_w;    // write end of the program's stdin (fd 5 in the shim)
  UniqueFd stdout_r;   // read end of the program's stdout (fd 6)
  UniqueFd stderr_r;   // read end of the program's stderr (fd 7)
};

// The sockets and pipes between the daemon and one shim: the daemon's ends (O_CLOEXEC,
// non-blocking; pid and pidfd not set yet) and the shim's, in the order of its fds 3..7.
struct ShimChannels {
  ShimHandles daemon;
  UniqueFd shim[5];
};
Result<ShimChannels> MakeShimChannels();

// posix_spawn attributes of the daemon's helpers (a shim, the fork server): a session of their
// own (no controlling terminal, outside the daemon's process group) and a fresh process's signal
// state whatever the daemon's: it ignores SIGPIPE, one started under nohup or by a script's
// `cmd &` SIGHUP or SIGINT and SIGQUIT too, and an exec keeps what is ignored.
class HelperSpawnAttr {
 public:
  HelperSpawnAttr();
  ~HelperSpawnAttr();
  HelperSpawnAttr(const HelperSpawnAttr&) = delete;
  HelperSpawnAttr& operator=(const HelperSpawnAttr&) = delete;
  const posix_spawnattr_t* get() const { return &attr_; }
  bool ok() const { return ok_; }

 private:
  posix_spawnattr_t attr_;
  bool ok_ = false;
};

// All returned fds are O_CLOEXEC and non-blocking. The shim gets /dev/null as stdin/stdout,
// inherits stderr (the daemon's log) and nothing else.
Result<ShimHandles> SpawnShim(const std::string& binary);

}  // namespace ci::runtime
