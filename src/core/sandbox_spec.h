// SandboxSpec: a plain value describing one sandbox, filled from the request and the hardening
// profile, then translated by each backend (local shim plan, Docker ContainerCreate, Pod).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ci {

struct SandboxLimits {
  uint64_t memory_bytes = 256ull << 20;  // memory.max / limit_in_bytes; swap is always 0
  uint32_t cpu_time_sec = 5;             // RLIMIT_CPU of the program
  uint32_t pids = 64;                    // pids.max of the whole sandbox
  uint32_t cpu_percent = 0;  // CPU bandwidth cap (cpu.max, cfs_quota_us), 100 = one core; 0 = none
  uint64_t workspace_bytes = 100ull << 20;  // tmpfs /workspace
  uint64_t tmp_bytes = 64ull << 20;         // tmpfs /tmp
  // Per process kernel quotas (rlimits), far below the host's defaults, so that one sandbox
  // cannot use up what the kernel counts per user: open files, queued signals (~threads-max on
  // the host), POSIX message queue bytes, locked memory.
  uint32_t open_files = 1024;                   // RLIMIT_NOFILE
  uint32_t queued_signals = 1024;               // RLIMIT_SIGPENDING
  uint64_t message_queue_bytes = 800ull << 10;  // RLIMIT_MSGQUEUE
  uint64_t locked_memory_bytes = 8ull << 20;    // RLIMIT_MEMLOCK
  bool operator==(const SandboxLimits&) const = default;
};

struct SandboxSecurity {
  bool no_new_privs = true;
  bool read_only_root = true;
  bool network_none = true;          // own network namespace holding only `lo`
  std::string seccomp_profile_json;  // OCI seccomp JSON (policies/); empty = no filter
  std::string seccomp_profile_name;  // how reports name it: "default", "strict", "file /x.json"
  bool seccomp_log_denied = false;   // denied calls are allowed and logged (debugging a profile)
  bool operator==(const SandboxSecurity&) const = default;
};

struct SessionIdentity {
  std::string id;
  double created_at = 0;  // unix seconds
  double expires_at = 0;
  std::string client;  // the API key's name that owns it ("" without keys)
  bool operator==(const SessionIdentity&) const = default;
};

struct SandboxSpec {
  // "host": read-only binds of the host's /usr, /lib*, /bin, /sbin and a generated /etc.
  // Otherwise a directory holding an unpacked image root.
  std::string rootfs = "host";
  uint32_t uid = 65532;
  uint32_t gid = 65532;
  std::string hostname = "sandbox";
  std::string cwd = "/workspace";
  std::vector<std::string> env;  // "KEY=value"
  SandboxLimits limits;
  SandboxSecurity security;
  std::string cgroup_root;  // empty: detect (v2 unified, else v1 controllers)
  // 0: an execution sandbox (one Run). Otherwise a session sandbox (api.md "Sessions"): any
  // number of Runs, and it ends by itself at this unix time even when the daemon is gone.
  int64_t session_expires_at = 0;
  // The daemon's egress proxy serves it (docs/egress.md): a backend gives it the way in
  // (Sandbox::ListenInside), e.g. Docker's agent even for a session's container.
  bool egress = false;
  // A session's identity (the API's), for backends whose sandboxes outlive a daemon replica
  // (kubernetes: labels and annotations of the pod, so any replica finds the session).
  SessionIdentity session;
  // Execution sandboxes: a program the backend may start as soon as the sandbox is up, before
  // any request (a pre-started interpreter, with its warm imports done). It must write a byte to
  // its fd 3 (a pipe; absent where nothing is pre-started) once it is ready, then waits for its
  // first stdin line, the run's go (RunPayload::go); it shows nothing before the go, and from the
  // go on keeps its CPU time within limits.cpu_time_sec (it is started with
  // kPrestartCpuAllowanceSec more, for its imports). A backend that does not pre-start ignores
  // it: the Run then starts the payload's argv with the go in front of stdin.
  std::vector<std::string> prestart_argv;
  // Execution sandboxes whose backend runs a fork server of its own (the Docker agent,
  // src/agent/python_fork_server.h): that server's argv (python_program.h PythonZygoteArgv);
  // prestart_argv, when a `python3 -c` program, is then forked from it instead of started. Empty:
  // none.
  std::vector<std::string> zygote_argv;
  // The WARM_IMPORTS a Python program in it finds imported; empty for a program that imports
  // none of them (python_imports.h). A backend with an interpreter of each kind (local: a fork
  // server each) forks the program from the smaller one: cheaper to fork, run and exit.
  std::vector<std::string> warm_imports;
  // Whose execution asks for it ("" for the warm pool's refills and without API keys): a backend
  // that reuses sandboxes takes one that last ran this client's program (docker's recycle bin).
  // It is not part of what a sandbox is: the pool matches specs without it.
  std::string client;
  // Equal specs make interchangeable sandboxes (the warm pool relies on it, clients aside).
  bool operator==(const SandboxSpec&) const = default;
};

// Checks the invariants every backend relies on; a failure names the field.
Status Validate(const SandboxSpec& spec);

// The environment every backend gives the program (docs/api.md "Sandbox defaults").
std::vector<std::string> DefaultSandboxEnv();

}  // namespace ci
