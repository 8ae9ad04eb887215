// Init's service loop once the sandbox is built: it answers the daemon on fd 4 (stage files, run
// the program, collect the workspace, exit). Single-threaded, blocking, exception-free.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/wire/messages.h"

namespace ci::runtime {

// Who the program becomes in init's child before exec. switch_user: init is a user of its own
// (userns.h), so the child takes the sandbox user's ids and drops init's capabilities; otherwise
// init already is that user and holds nothing.
struct ProgramUser {
  bool switch_user = false;
  uint32_t uid = 0;
  uint32_t gid = 0;
};

// Sends "ready" and serves until kExit or EOF; returns init's exit code. A session sandbox
// (`session_expires_at` != 0) serves any number of runs and exits at that unix time.
int ServeDaemon(int64_t session_expires_at, const ProgramUser& user);

// Forks the program (stdio = fds 5/6/7, own process group, rlimits), waits for it or for a kill
// request on fd 4, then kills and reaps everything else in the sandbox but the sessions listed in
// `background`. `daemon_gone` is set when fd 4 hit EOF meanwhile. A background request only starts
// the program in a session of its own (added to `background`) and returns.
// A program serving calls (req.serves_calls) gets a socket as fd 3; init's end goes into
// `call_socket` (-1 when it could not be made).
proto::Exited RunProgram(const proto::RunRequest& req, const ProgramUser& user, int signal_fd,
                         std::vector<pid_t>* background, bool* daemon_gone,
                         int* call_socket = nullptr);

// kPipes: the three descriptors (closed here) become the next program's stdio, fds 5/6/7; false
// when they are not three or cannot be placed.
bool InstallProgramStdio(std::vector<int>& fds);

// Forks req.argv with the run's stdio (fds 5/6/7, closed here afterwards: the daemon sees EOF
// once the program's tree is gone); -1 when fork failed. `fd3` >= 0 becomes its fd 3. A
// background request's program gets a session of its own and /dev/null for stdio, or with
// `process` (kSpawn) the run's stdio; neither gets RLIMIT_CPU.
pid_t ForkProgram(const proto::RunRequest& req, const ProgramUser& user, int fd3,
                  bool process = false);

// A program started ahead of its run (RunRequest::prestart), waiting on its stdin for the go line.
struct Prestarted {
  pid_t pid = 0;                 // 0: none (or it could not be forked)
  uint64_t children_cpu_ms = 0;  // CPU of init's reaped children when it was forked
};

// RLIMIT_CPU of a prestarted program until its go: the spec's limit plus this, so that the warm
// imports fit. The program sets the spec's limit from its go on (SandboxSpec::prestart_argv).
constexpr uint32_t kPrestartCpuAllowanceSec = 60;

// Forks the program as RunProgram does, with a pipe as its fd 3, and returns once it is ready:
// it wrote a byte there. A program that ended first, closed fd 3 without a byte, or was not
// ready within kPrestartReadyTimeoutSec (then killed) is an error (`error` says which; pid 0).
Prestarted PrestartProgram(const proto::RunRequest& req, const ProgramUser& user,
                           std::string* error);
constexpr int kPrestartReadyTimeoutSec = 60;

// The run of a prestarted program: kStarted, then as RunProgram; the CPU it used before (its
// start, its warm imports) is not the run's. nullopt when it had already ended: kPrestartEnded
// was sent instead.
std::optional<proto::Exited> ResumeProgram(const Prestarted& program, int signal_fd,
                                           std::vector<pid_t>* background, bool* daemon_gone);

// Kills everything but init and the sessions in `background` until nothing else is left; records
// `program`'s status on the way (reaped background leaders drop out of the list).
void KillAndReapAll(pid_t program, int* status, bool* have_status, std::vector<pid_t>* background);

// Where a program serving calls finds its socket.
constexpr int kCallSocketFd = 3;

}  // namespace ci::runtime
