// code-interpreter-agent: PID 1 of the Docker backend's containers (exec_agent.h). Built static,
// so that it runs in any executor image whatever its libraries.
//
//   code-interpreter-agent [--wipe DIR]... [--expires-at UNIX_TIME] [--fork-timeout-ms MS]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "agent/exec_agent.h"

int main(int argc, char** argv) {
  ci::agent::AgentOptions o;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--wipe") == 0 && has_value) {
      o.wipe.emplace_back(argv[++i]);
    } else if (std::strcmp(argv[i], "--expires-at") == 0 && has_value) {
      o.expires_at = std::strtoll(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--fork-timeout-ms") == 0 && has_value) {
      o.fork_timeout_ms = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: %s [--wipe DIR]... [--expires-at UNIX_TIME] [--fork-timeout-ms MS]\n",
                   argv[0]);
      return 2;
    }
  }
  // Its kills are kill(-1): as PID 1 of a container they reach the container's processes only,
  // anywhere else every process of its user.
  if (::getpid() != 1) {
    std::fprintf(stderr, "%s: must run as PID 1 of a container (or a pid namespace)\n", argv[0]);
    return 2;
  }
  return ci::agent::RunExecAgent(o);
}
