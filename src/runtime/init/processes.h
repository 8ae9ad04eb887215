// Processes started beside a session's runs (kSpawn: E2B's processes): each in a session of its
// own, spared by the runs' kills (it is listed with the background programs), with the stdio the
// daemon passed and a status pipe init writes its end to when it reaps it.
#pragma once

#include <sys/types.h>

#include <string_view>
#include <vector>

#include "runtime/init/service_loop.h"

namespace ci::runtime {

// kProcessFds: stdin, stdout, stderr and status, for the next kSpawn; false when not four.
bool TakeProcessFds(std::vector<int>& fds);
// kSpawn {argv, env, cwd}: forks it with the fds taken and answers kSpawned {pid} or kError;
// false when fd 4 broke.
bool SpawnProcess(std::string_view payload, const ProgramUser& user,
                  std::vector<pid_t>* background);
// kSignal {pid, signal}: signals the process group of a process started so, if still running;
// answers kSignalled, or kError for a pid that never was one; false when fd 4 broke.
bool SignalProcess(std::string_view payload);
// Every reaped child goes through here: a spawned one's status goes to its status pipe, and a
// background program drops out of `background`.
void ChildReaped(pid_t pid, int status, std::vector<pid_t>* background);
// Reaps whatever has ended, without waiting.
void ReapEnded(std::vector<pid_t>* background);

}  // namespace ci::runtime
