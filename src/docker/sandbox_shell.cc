#include "docker/sandbox_shell.h"

#include <fmt/format.h>

namespace ci::docker {

// Sessions (README "Sessions"). `k` stops, then SIGKILLs, every live process but PID 1, the
// shell itself, the pids in $keep, the sessions listed in $bg (the background programs' pids,
// each its own session id: setsid), read from field 6 of /proc/PID/stat (the whole file, after
// the last ')': the name may hold anything, newlines included), and the sessions led by the
// interpreter and the relays to it (named ci-interpreter and ci-relay, python_session.cc),
// whichever replica started them. A program may take those names to outlive the cleanup; it gains
// nothing a cell's subprocess does not have. A zombie is skipped only when no thread of it is left
// (a thread-group leader that ended while its other threads run shows Z too). Each phase is
// repeated until a pass finds nothing (children forked meanwhile); SIGSTOP first, so a fork bomb
// cannot refill the slots freed one by one. Builtins only: it needs no free pid.
const char* const kSessionKillFunction =
    "k() { local s n d p t f l a b; for s in STOP KILL; do for n in {1..100}; do f=; "
    "for d in /proc/[1-9]*; do p=${d#/proc/}; [ \"$p\" = 1 ] || [ \"$p\" = $$ ] && continue; "
    "t=; read -r -d '' t 2>/dev/null < \"$d/stat\"; [ -n \"$t\" ] || continue; t=${t##*) }; "
    "set -- $t; case \"$s$1\" in STOPT|STOPt) continue;; *Z|*X) b=1; "
    "while read -r a b; do [ \"$a\" = Threads: ] && break; b=1; done 2>/dev/null < \"$d/status\"; "
    "[ \"${b:-1}\" -gt 1 ] 2>/dev/null || continue;; esac; "
    "case \" $bg \" in *\" ${4:-x} \"*) continue;; esac; "
    "read -r l 2>/dev/null < \"/proc/$4/stat\" && "
    "case \"$l\" in \"$4 (ci-interpreter) \"*|\"$4 (ci-relay) \"*) continue;; esac; "
    "case \" $keep \" in *\" $p \"*) continue;; esac; "
    "kill -$s \"$p\" 2>/dev/null && f=1; done; [ -n \"$f\" ] || break; done; done; }; ";
// A session run: `ci-run <background pids> <cpu seconds> <watchdog seconds> argv...`. The program
// gets RLIMIT_CPU (soft N, hard N+1 as in container_config.cc) in a subshell of its own. A
// watchdog subshell forked before it (while a pid is surely free) waits on a pipe only it holds
// (`read -t`: no `sleep` for the program to see) and then kills what the program started, with
// builtins only: the daemon's kill exec needs a free pid, which a fork bomb can keep from it. Its
// stdout and stderr are relayed by two `cat`s, so what holds the exec's stream is known: once the
// program has exited and its leftovers are killed, the relays get 500 ms to drain (EOF on fd 7 once
// both are gone: they alone hold its write end, opened through /proc) and are then killed. Without
// them a background program's child that inherited the program's stdout would hold the exec's
// stream, and the Engine would wait 2 s for it on every later exec's exit too (its exit events
// are handled one after the other per container).
const char* const kSessionRunScript =
    "bg=$1 c=$2 w=$3 keep=; shift 3; exec 7< <(:); exec 8> /proc/$$/fd/7; "
    "exec 5> >(exec cat 7<&-); o=$!; exec 6> >(exec cat >&2 5>&- 7<&-); e=$!; exec 8>&-; "
    "[ \"$w\" = 0 ] || { exec 9< <(:) 3> \"/proc/$BASHPID/fd/9\"; read -r -t \"$w\" -u 9 _; "
    "keep=\"$BASHPID $o $e\"; k; } </dev/null >/dev/null 2>&1 5>&- 6>&- 7<&- & "
    "(ulimit -S -t \"$c\" 2>/dev/null; ulimit -H -t $((c + 1)) 2>/dev/null; exec \"$@\") "
    ">&5 2>&6 5>&- 6>&- 7<&-; s=$?; exec 5>&- 6>&-; keep=\"$o $e\"; k; "
    "read -r -t 0.5 -u 7 _ || [ $? -le 128 ] || kill -9 $o $e 2>/dev/null; exit $s";
// A background program: its own session, stdio on /dev/null; prints its pid (= session id) once
// setsid() is done, so the next run's kill cannot miss it. The exec's bash is a session leader
// (runc), so its `&` child is not a group leader and setsid(1) does not fork.
const char* const kStartBackgroundScript =
    "setsid \"$@\" </dev/null >/dev/null 2>&1 & p=$!; for i in {1..400}; do "
    "read -r t 2>/dev/null < /proc/$p/stat || break; t=${t##*) }; set -- $t; "
    "[ \"$4\" = \"$p\" ] && break; sleep 0.005; done; echo $p";
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
  run += exec.session ? std::string(kSessionKillFunction) + kSessionRunScript
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
  std::vector<std::string> argv = {"/bin/bash", "-c", kStartBackgroundScript, "ci-bg"};
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
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

}  // namespace ci::docker
