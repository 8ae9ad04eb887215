// The daemon's side of the fork server (zygote.h): starts `code-interpreter fork` and asks it
// for shims. A shim from it is the same shim as SpawnShim's, but its sandbox's programs run
// `python3 -c` in the interpreter the zygote loaded instead of starting one (src/runtime/README.md
// "Fork server").
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/shim_spawn.h"
#include "runtime/unique_fd.h"

namespace ci::runtime {

class ForkServer {
 public:
  // Spawns `binary fork` with `env` (the sandboxes' environment: the interpreter's
  // os.environ) and waits until it has imported `modules` and compiled `sources` (60 s at most).
  static Result<std::unique_ptr<ForkServer>> Start(const std::string& binary,
                                                   const std::vector<std::string>& env,
                                                   const std::vector<std::string>& modules,
                                                   const std::vector<std::string>& sources);
  ~ForkServer();  // ends the zygote (its shims live on)

  // Whether it serves; false for good once it failed.
  bool Ready();
  // A shim forked from the zygote, or why not (the zygote then serves no more).
  Result<ShimHandles> SpawnShim();

 private:
  ForkServer(pid_t pid, UniqueFd control) : pid_(pid), control_(std::move(control)) {}
  void Fail(const std::string& why);

  std::mutex mu_;  // one request at a time on the control socket
  pid_t pid_;
  UniqueFd control_;
  bool failed_ = false;
};

}  // namespace ci::runtime
