// Putting a container back as it started, between two executions (the agent's kRecycle): no
// process but the agent, nothing in its writable places, no System V IPC object. Each step checks
// its own result; any doubt is a refusal, and the daemon then removes the container instead.
#pragma once

#include <sys/types.h>

#include <string>

#include "core/sandbox_wipe.h"

namespace ci::agent {

using ci::OnlyThisProcessLeft;
using ci::RecordRoots;
using ci::RemoveSysvIpc;
using ci::UncoveredWritableMounts;
using ci::WipeRoot;
using ci::WipeRoots;

// SIGKILLs every other process and reaps them all (the agent is PID 1, so orphans are its
// children too); false when some process was still there after a few seconds. `*spared`: a child
// of the agent (the fork server, zygote.h) left alone, or 0; set to 0 when it was reaped here
// (dead, its pid no longer names it). Only an unreaped child's pid is safe to go by.
bool KillAndReapEverything(std::string* error, pid_t* spared);

}  // namespace ci::agent
