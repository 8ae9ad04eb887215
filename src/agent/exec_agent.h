// The agent's service loop: PID 1 of an executor container, answering the daemon over the
// container's attach stream (agent_wire.h). It starts the daemon's execs with their own stdio
// relayed as frames, so a run costs a fork and an exec instead of a `docker exec` (a runc
// process, a new process joining the container's namespaces, several Engine round trips); it
// reaps every orphan of the container as an init must; and it recycles the container between
// executions (recycle.h). Single-threaded, one poll().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ci::agent {

struct AgentOptions {
  int in_fd = 0;   // frames from the daemon (the attach stream's stdin)
  int out_fd = 1;  // frames to the daemon (the attach stream's stdout)
  // The container's writable places, emptied by a recycle (--wipe).
  std::vector<std::string> wipe;
  // Unix time at which the agent ends by itself (a session's expiry; 0: never), so the container
  // outlives a crashed daemon by its TTL at most.
  int64_t expires_at = 0;
  // How long the fork server may take to report a program's pid (--fork-timeout-ms): a server
  // that does not (stopped, starved) is killed and its execs fail, so the daemon starts them by
  // exec instead of waiting for ever.
  int fork_timeout_ms = 10'000;
};

// Serves until the daemon's stream ends (then kills everything and returns 0) or the expiry.
int RunExecAgent(const AgentOptions& options);

}  // namespace ci::agent
