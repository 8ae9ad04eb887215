// The local container runtime: sandboxes built from Linux namespaces, cgroups and a re-executed
// shim of our own binary (see src/runtime/README.md).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/executor.h"
#include "core/status.h"
#include "runtime/kernel/sandbox_ids.h"

namespace ci::runtime {

struct LocalExecutorOptions {
  std::string shim_binary = "/proc/self/exe";  // the code-interpreter binary, re-executed as `shim`
  // "" = detect: cgroup v2 if /sys/fs/cgroup is cgroup2 with memory+pids available, else v1
  // controllers under /sys/fs/cgroup/<controller>/code-interpreter/. A SandboxSpec's own
  // cgroup_root, when set, wins over this.
  std::string cgroup_root;
  // As root: the host uids/gids sandboxes take one of each while they live (SANDBOX_ID_RANGE).
  // Rootless: unused, the daemon user's subordinate ids (/etc/subuid, /etc/subgid) are used.
  IdRange sandbox_ids = kDefaultSandboxIds;
  // Where the claims are kept (one lock file per id); "" = /run/code-interpreter/sandbox-ids as
  // root, $XDG_RUNTIME_DIR/code-interpreter-sandbox-ids or /tmp/code-interpreter-sandbox-ids-<uid>
  // rootless.
  std::string id_lock_dir;
  // Rootless: the files the subordinate ids are read from (tests point them elsewhere).
  std::string subuid_file = "/etc/subuid";
  std::string subgid_file = "/etc/subgid";
  // The fork server (src/runtime/README.md "Fork server"): as root, Python sandboxes of the host's
  // root get their interpreter forked from one that is already loaded, with these modules imported,
  // instead of starting one. Its environment must be the sandboxes' (a program with another runs an
  // exec).
  bool fork_server = false;
  std::vector<std::string> warm_imports;
  // Non-empty: a second fork server with only these modules loaded, for the sandboxes whose
  // spec names no warm import (SandboxSpec::warm_imports): a smaller interpreter to fork from.
  std::vector<std::string> lean_imports;
  // Python sources the fork server compiles once (the driver): a program `python3 -c SOURCE` with
  // one of them runs that code object instead of compiling it (~1 ms of CPU per program).
  std::vector<std::string> compiled_ahead;
  std::vector<std::string> sandbox_env;
  // Execution sandboxes are put back by their init after an execution and serve the next one of
  // the same spec and client (recycle_bin.h) instead of being removed (RECYCLE_SANDBOXES).
  bool recycle_sandboxes = false;
};

// Sandboxes' I/O runs on strands of `ex`, so any number of threads may run its io_context.
// Ignores SIGPIPE process-wide: a write to a dead program's stdin must fail with EPIPE instead of
// killing the daemon.
std::unique_ptr<Executor> MakeLocalExecutor(asio::any_io_executor ex, LocalExecutorOptions opts);

// Entry point of `code-interpreter shim` (argv[0]="code-interpreter", argv[1]="shim").
int ShimMain(int argc, char** argv);

// Startup self-check used by /health: namespaces usable, cgroup controllers found, shim binary
// executable. Synchronous and cheap (reads a few /proc and /sys files); not for hot paths.
Status CheckLocalRuntime(const LocalExecutorOptions& opts);

}  // namespace ci::runtime
