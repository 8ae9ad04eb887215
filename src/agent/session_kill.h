// The kill of a session container's programs that spares its background programs (the agent's
// kKillAll with a list): what sandbox_shell's bash function does from an exec, done by the agent
// itself, so it needs no free pid while a fork bomb fills the limit.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace ci::agent {

// SIGSTOPs, then SIGKILLs, every process but the agent whose session is not in `spared` nor, with
// `spare_interpreters` (session containers), led by the session's interpreter or a relay to it
// (comm ci-interpreter, ci-relay); each pass is repeated until it finds nothing (children forked
// meanwhile). With `spared` empty and no such session this is kill(-1).
void KillAllButSessions(const std::vector<pid_t>& spared, bool spare_interpreters = true);

// SIGSTOPs, then SIGKILLs, every live process but the agent and `keep` (0: none), whatever its
// name, state or session, each pass repeated until it finds nothing. Zombies the agent has not
// reaped yet are dead, but a thread-group leader that ended while its other threads run is not.
void KillAllBut(pid_t keep);

// The session ids of a kKillAll payload: decimal numbers separated by spaces (the daemon's
// background list); others are ignored.
std::vector<pid_t> ParseSessionList(const std::string& text);

}  // namespace ci::agent
