// The shell the sandbox runs (README "One execution", "Sessions"): the container's PID 1, the
// wrappers a program's exec runs under, the background start and the kill execs, each as the
// exec's argv. Pure: strings in, argv out (tests/docker/pure_test.cc, "SandboxShell").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "container/shell_programs.h"
#include "core/executor.h"

namespace ci::container {

// Session shell (the files explain them): the leftover kill function `k` (session_kill.sh), the
// run wrapper `ci-run <background pids> <cpu seconds> <watchdog seconds> argv...`
// (session_run.sh), the background start printing its pid (background_start.sh).
inline constexpr std::string_view kSessionKillFunction = programs::kSessionKill;
inline constexpr std::string_view kSessionRunScript = programs::kSessionRun;
inline constexpr std::string_view kStartBackgroundScript = programs::kBackgroundStart;
// An execution's run wrapper: `ci-run argv...`, leftovers killed with kill(-1) after the program.
extern const char* const kExecutionRunScript;

// The container's PID 1: waits forever, or (sessions) `sleep_seconds` until the session expires.
std::vector<std::string> ContainerInitArgv(std::optional<int64_t> sleep_seconds);

// `ulimit`s that give the wrapper, and so the program, the spec's kernel quotas (open files,
// queued signals, message queue bytes, locked memory and, with `cpu`, RLIMIT_CPU soft N, hard
// N+1), for an engine that cannot set rlimits itself (a pod): a process may always lower its
// own. Shell commands ending in "; ".
std::string RunLimitsScript(const SandboxLimits& limits, bool cpu);

// `argv` under `limits` (RunLimitsScript): bash sets them and execs it; `argv` unchanged when
// `limits` is empty.
std::vector<std::string> WithRunLimits(const std::string& limits,
                                       const std::vector<std::string>& argv);

// What the program's exec carries.
struct ProgramExec {
  std::vector<std::string> program;       // the program's argv
  std::vector<std::string> inline_files;  // "path, content" pairs (InlineFiles), written first
  bool session = false;
  std::string background;     // sessions: the spared background programs' pids (BackgroundList)
  uint32_t cpu_time_sec = 0;  // sessions: the program's RLIMIT_CPU
  std::string limits;         // RunLimitsScript's, set by the wrapper first (empty: none)
  // Sessions: the wrapper's own kill of the program's processes this long after it starts (a
  // fork bomb can keep the daemon's kill exec from starting); 0: none.
  uint32_t watchdog_ms = 0;
};

// The program's exec: the run wrapper (the session's when `session`), with the inlined files
// written by a first bash that then execs into the wrapper.
std::vector<std::string> ProgramArgv(const ProgramExec& exec);

// `bash -c WRITER wrapper N path1 content1 ...`: writes the files (exit 126 when one cannot be
// written) and execs `bash -c wrapper ci-run` with the arguments appended after it; no process
// the program can see holds the contents in its command line.
std::vector<std::string> InlineFilesArgv(const std::string& wrapper,
                                         const std::vector<std::string>& files);

// A session's background program: started in a session of its own, its pid printed.
std::vector<std::string> BackgroundStartArgv(const std::vector<std::string>& program);

// A session's process (core/executor.h ProcessSpec): prints "pid N" (or "error: ...") on its
// stdout first, then runs the program in `cwd` with exactly `env`.
std::vector<std::string> ProcessStartArgv(const std::string& cwd,
                                          const std::vector<std::string>& env,
                                          const std::vector<std::string>& program);

// Signals the process group `pid` (a session's process) as the sandbox user; it ended: no error.
std::vector<std::string> SignalArgv(uint32_t pid, int signal);

// Kills every process of the sandbox user but PID 1; in a session (`background` = the background
// programs' pids) those programs' sessions are spared.
std::vector<std::string> KillArgv(const std::string* background);

// The program's exit status as the Engine reports it (128+N: a death by signal N, as a shell
// reports it) into `out` (nothing when unknown).
void SetExitStatus(std::optional<int> status, RunOutcome& out);

// The background programs' pids as the session scripts take them: "12 34".
std::string BackgroundList(const std::vector<long>& pids);

}  // namespace ci::container
