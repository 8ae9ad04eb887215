#include "container/sandbox_shell.h"

#include <fmt/format.h>

namespace ci::container {

// Like local's init: once the program exits, whatever it left behind is killed, so a background
// process holding its stdout (`sleep 300 &`) cannot keep the run going. The wrapper is bash
// (kill(-1) spares it and PID 1) and passes the status on (128+N for a death by signal N, as the
// Engine reports it).
const char* const kExecutionRunScript = "\"$@\"; s=$?; kill -9 -1 2>/dev/null; exit $s";

// PID 1 only waits, with SIGCHLD ignored so the kernel reaps the orphans reparented to it:
// zombies would keep their pids charged and a fork bomb's remains would fill the pids limit for
// good (no exec could start). Not tini: kill(-1) would reach its child and end the container.
// bash, because dash does not pass an ignored SIGCHLD on to exec. A session's PID 1 sleeps until
// its expiry, so the session ends by itself, daemon or not.
std::vector<std::string> ContainerInitArgv(std::optional<int64_t> sleep_seconds) {
  std::string sleep = sleep_seconds ? std::to_string(*sleep_seconds) : "infinity";
  return {"/bin/bash", "-c", "trap '' CHLD; exec sleep " + sleep};
}

std::vector<std::string> InlineFilesArgv(const std::string& wrapper,
                                         const std::vector<std::string>& files) {
  std::vector<std::string> argv = {
      "/bin/bash", "-c",
      "n=$1; shift; while [ \"$n\" -gt 0 ]; do { [ ! -L \"$1\" ] || rm -f -- \"$1\"; } && "
      "printf %s \"$2\" > \"$1\" || exit 126; shift 2; n=$((n - 1)); done; "
      "exec /bin/bash -c \"$0\" ci-run \"$@\"",
      wrapper, std::to_string(files.size() / 2)};
  argv.insert(argv.end(), files.begin(), files.end());
  return argv;
}

// A session's wrapper kills leftovers but spares background programs' sessions; it takes the
// background list and the CPU seconds before the program's argv.
std::vector<std::string> ProgramArgv(const ProgramExec& exec) {
  std::string run = exec.limits;
  run += exec.session ? std::string(kSessionKillFunction) + std::string(kSessionRunScript)
                      : std::string(kExecutionRunScript);
  std::vector<std::string> argv = {"/bin/bash", "-c", run, "ci-run"};
  if (!exec.inline_files.empty()) argv = InlineFilesArgv(run, exec.inline_files);
  if (exec.session) {
    argv.push_back(exec.background);
    argv.push_back(std::to_string(exec.cpu_time_sec));
    argv.push_back(fmt::format("{}.{:03}", exec.watchdog_ms / 1000, exec.watchdog_ms % 1000));
  }
  argv.insert(argv.end(), exec.program.begin(), exec.program.end());
  return argv;
}

std::string RunLimitsScript(const SandboxLimits& l, bool cpu) {
  std::string s;
  if (cpu) {
    // Soft first: a hard limit below the soft one is refused.
    s += "ulimit -S -t " + std::to_string(l.cpu_time_sec) + " 2>/dev/null; ";
    s += "ulimit -H -t " + std::to_string(l.cpu_time_sec + 1) + " 2>/dev/null; ";
  }
  s += "ulimit -n " + std::to_string(l.open_files) + " 2>/dev/null; ";
  s += "ulimit -i " + std::to_string(l.queued_signals) + " 2>/dev/null; ";
  s += "ulimit -q " + std::to_string(l.message_queue_bytes) + " 2>/dev/null; ";
  s += "ulimit -l " + std::to_string(l.locked_memory_bytes >> 10) + " 2>/dev/null; ";  // KiB
  return s;
}

std::vector<std::string> WithRunLimits(const std::string& limits,
                                       const std::vector<std::string>& argv) {
  if (limits.empty()) return argv;
  std::vector<std::string> out = {"/bin/bash", "-c", limits + "exec \"$@\"", "ci-limits"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::vector<std::string> BackgroundStartArgv(const std::vector<std::string>& program) {
  std::vector<std::string> argv = {"/bin/bash", "-c", std::string(kStartBackgroundScript), "ci-bg"};
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

std::vector<std::string> ProcessStartArgv(const std::string& cwd,
                                          const std::vector<std::string>& env,
                                          const std::vector<std::string>& program) {
  std::vector<std::string> argv = {"/bin/bash",  "-c", std::string(programs::kProcessStart),
                                   "ci-process", cwd,  std::to_string(env.size())};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

std::vector<std::string> SignalArgv(uint32_t pid, int signal) {
  return {"/bin/bash", "-c", "kill -s \"$0\" -- \"-$1\" 2>/dev/null; exit 0",
          std::to_string(signal), std::to_string(pid)};
}

// kill(-1) never reaches the namespace's init, nor the caller. PID 1 is our `sleep` (no
// docker-init, see container_config.cc), so the container and its tmpfs workspace survive for
// Collect. No pkill needed in the image: the shell's kill builtin does it.
std::vector<std::string> KillArgv(const std::string* background) {
  if (background == nullptr) return {"/bin/sh", "-c", "kill -9 -1"};
  std::string script = "bg=$1; ";
  script += kSessionKillFunction;
  script += "k";
  return {"/bin/bash", "-c", script, "ci-kill", *background};
}

void SetExitStatus(std::optional<int> status, RunOutcome& out) {
  if (status && *status > 128 && *status <= 128 + 64) {
    out.signal = *status - 128;
  } else if (status) {
    out.exit_code = *status;
  }
}

std::string BackgroundList(const std::vector<long>& pids) {
  std::string out;
  for (long pid : pids) {
    if (!out.empty()) out += ' ';
    out += std::to_string(pid);  // appended: `" " + string&&` trips GCC 12 -Werror=restrict
  }
  return out;
}

}  // namespace ci::container
