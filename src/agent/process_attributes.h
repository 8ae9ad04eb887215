// What a process of the sandbox's user can change about another process of that user that
// outlives its execution (the agent itself, the fork server): scheduling (nice, policy, real-time
// priority, sched_setattr's slice, deadline and clamps), CPU set, I/O priority and resource
// limits, plus its thread count. A recycle compares
// them with their values at the start, so that no execution inherits what another one set.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace ci::agent {

// The fields of /proc/PID/stat after the command name (field 3 onwards, 0-based here); empty
// when the process is gone.
std::vector<std::string> StatFields(pid_t pid);

// The attributes above as text, one line per kind (comparable; empty when unreadable).
std::string ProcessAttributes(pid_t pid);

// "" when `now` equals `before`, else the first line that differs, as "BEFORE -> NOW".
std::string AttributeChange(const std::string& before, const std::string& now);

}  // namespace ci::agent
