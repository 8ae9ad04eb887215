// A directory's first entries listed by the agent itself (kListDir): whether a pod's workspace
// holds anything to collect, where the `tar` exec that would tell cost a process and a round trip
// per execution. The agent runs as the sandbox user: it lists only what the program could.
#pragma once

#include <cstdint>
#include <string>

#include "agent/agent_wire.h"

namespace ci::agent {

// At most `max` entries of `path` ("." and ".." left out), or why not. The path itself is not
// followed when it is a symbolic link.
DirListing ListDir(uint32_t id, const std::string& path, uint32_t max);

}  // namespace ci::agent
