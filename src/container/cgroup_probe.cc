#include "container/cgroup_probe.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "core/mountinfo.h"
#include "core/pidfd.h"

namespace ci::container {
namespace {

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t end = s.find(sep, start);
    out.emplace_back(s.substr(start, end == std::string_view::npos ? s.npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

// "key value" lines: the value of `key`, if present.
bool KeyValue(const std::string& text, const std::string& key, uint64_t* value) {
  std::istringstream in(text);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) {
      *value = v;
      return true;
    }
  }
  return false;
}

bool Number(const std::string& text, uint64_t* value) {
  std::istringstream in(text);
  return static_cast<bool>(in >> *value);
}

bool ReadSmallFile(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

int PidfdKill(int fd) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0));
}

}  // namespace

CgroupCounters ParseCgroupFiles(const CgroupFiles& files) {
  CgroupCounters c;
  auto get = [&](const char* name) -> const std::string* {
    auto it = files.find(name);
    if (it == files.end()) return nullptr;
    c.any = true;
    return &it->second;
  };
  uint64_t v = 0;
  if (const auto* t = get("memory.events"); t && KeyValue(*t, "oom_kill", &v) && v > 0) {
    c.oom_killed = true;
    c.oom_kills = v;
  }
  if (const auto* t = get("memory.oom_control"); t && KeyValue(*t, "oom_kill", &v) && v > 0) {
    c.oom_killed = true;
    c.oom_kills = v;
  }
  if (const auto* t = get("pids.events"); t && KeyValue(*t, "max", &v) && v > 0) {
    c.pids_limit_hit = true;
    c.pids_limit_hits = v;
  }
  if (const auto* t = get("memory.peak"); t && Number(*t, &v)) c.memory_peak_bytes = v;
  if (const auto* t = get("memory.max_usage_in_bytes"); t && Number(*t, &v)) {
    c.memory_peak_bytes = v;
  }
  if (const auto* t = get("cpu.stat"); t && KeyValue(*t, "usage_usec", &v)) {
    c.has_cpu = true;
    c.cpu_ms = v / 1000;
  }
  if (const auto* t = get("cpuacct.usage"); t && Number(*t, &v)) {
    c.has_cpu = true;
    c.cpu_ms = v / 1000000;
  }
  if (auto it = files.find("procs.cpu"); it != files.end() && Number(it->second, &v)) {
    c.has_processes_cpu = true;
    c.processes_cpu_ms = v * 10;  // clock ticks: USER_HZ is 100 on Linux
  }
  return c;
}

// Read by the shell's builtins, not `cat`: a fork and exec per file was most of an execution's
// time in a recycled pod (the probe runs after each one).
#define CI_PRINT_COUNTER_FILES                                                         \
  "cd /sys/fs/cgroup || exit 0; "                                                      \
  "for f in memory.events pids.events memory.peak cpu.stat memory/memory.oom_control " \
  "memory/memory.max_usage_in_bytes pids/pids.events cpuacct/cpuacct.usage; do "       \
  "[ -r \"$f\" ] && echo \"@${f##*/}\" && "                                            \
  "while IFS= read -r l || [ -n \"$l\" ]; do echo \"$l\"; done <\"$f\"; done; true"
const char* const kInContainerProbeScript = "kill -9 -1 2>/dev/null; " CI_PRINT_COUNTER_FILES;
const char* const kInContainerReadScript = CI_PRINT_COUNTER_FILES;
// /proc/<pid>/stat after "(comm) ": utime, stime, cutime and cstime are the 12th to 15th fields.
const char* const kInContainerCountersScript = CI_PRINT_COUNTER_FILES
    "; t=0; for p in /proc/[0-9]*; do [ \"${p#/proc/}\" = $$ ] && continue; "
    "read -r s 2>/dev/null <\"$p/stat\" || continue; set -- ${s##*) }; shift 11; "
    "t=$((t+$1+$2+$3+$4)); done; echo @procs.cpu; echo $t";
const char* const kRecycledProbeScript = CI_PRINT_COUNTER_FILES
    "; for f in cgroup.procs pids/cgroup.procs; do [ -r \"$f\" ] || continue; n=0; "
    "while read -r p; do n=$((n+1)); done <\"$f\"; echo @cgroup.procs; echo $n; break; done";
#undef CI_PRINT_COUNTER_FILES

int RecycledProcessCount(const CgroupFiles& files) {
  auto it = files.find("cgroup.procs");
  uint64_t n = 0;
  if (it == files.end() || !Number(it->second, &n) || n > 1u << 20) return -1;
  return static_cast<int>(n);
}

CgroupFiles SplitProbeOutput(std::string_view text) {
  CgroupFiles out;
  std::string* current = nullptr;
  auto lines = Split(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // the final newline
  for (const auto& line : lines) {
    if (!line.empty() && line[0] == '@') {
      current = &out[line.substr(1)];
    } else if (current != nullptr) {
      *current += line;
      *current += '\n';
    }
  }
  return out;
}

bool FindContainerCgroup(std::string_view proc_pid_cgroup, std::string_view mountinfo,
                         std::string_view container_id, HostCgroup* out, std::string* why) {
  auto mounts = ParseCgroupMounts(mountinfo);
  std::map<std::string, std::string> v1;  // controller -> path
  std::string unified;
  bool has_unified = false;
  for (const auto& line : Split(proc_pid_cgroup, '\n')) {
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (controllers.empty()) {
      unified = path;
      has_unified = true;
      continue;
    }
    for (const auto& c : Split(controllers, ',')) v1[c] = path;
  }
  HostCgroup cg;
  if (v1.count("memory") != 0 || v1.count("pids") != 0) {
    for (const char* c : {"memory", "pids", "cpuacct"}) {
      auto it = v1.find(c);
      if (it == v1.end()) continue;
      if (it->second.find(container_id) == std::string::npos) {
        *why = std::string(c) + " cgroup " + it->second + " does not name the container";
        return false;
      }
      std::string dir;
      std::string point;
      if (!ResolveCgroupDir(mounts, "cgroup", c, it->second, &point, &dir)) continue;
      (c == std::string("memory") ? cg.memory
       : c == std::string("pids") ? cg.pids
                                  : cg.cpuacct) = dir;
    }
    if (cg.pids.empty()) {
      *why = "no pids cgroup v1 mount for the container";
      return false;
    }
  } else if (has_unified) {
    if (unified.find(container_id) == std::string::npos) {
      *why = "cgroup " + unified + " does not name the container";
      return false;
    }
    cg.v2 = true;
    std::string point;
    if (!ResolveCgroupDir(mounts, "cgroup2", "", unified, &point, &cg.unified)) {
      *why = "no cgroup2 mount holds " + unified;
      return false;
    }
  } else {
    *why = "no cgroup in /proc/<pid>/cgroup";
    return false;
  }
  *out = cg;
  return true;
}

CgroupFiles ReadHostCgroupFiles(const HostCgroup& cg) {
  CgroupFiles files;
  auto read = [&](const std::string& dir, const char* name) {
    if (dir.empty()) return;
    std::string text;
    if (ReadSmallFile(dir + "/" + name, &text)) files[name] = text;
  };
  if (cg.v2) {
    for (const char* n : {"memory.events", "pids.events", "memory.peak", "cpu.stat"}) {
      read(cg.unified, n);
    }
  } else {
    read(cg.memory, "memory.oom_control");
    read(cg.memory, "memory.max_usage_in_bytes");
    read(cg.pids, "pids.events");
    read(cg.cpuacct, "cpuacct.usage");
  }
  return files;
}

CgroupCounters SinceBaseline(const CgroupCounters& now, const CountersBaseline& base) {
  CgroupCounters c = now;
  c.cpu_ms = now.cpu_ms > base.cpu_ms ? now.cpu_ms - base.cpu_ms : 0;
  c.oom_kills = now.oom_kills > base.oom_kills ? now.oom_kills - base.oom_kills : 0;
  c.oom_killed = c.oom_kills > 0;
  c.pids_limit_hits =
      now.pids_limit_hits > base.pids_limit_hits ? now.pids_limit_hits - base.pids_limit_hits : 0;
  c.pids_limit_hit = c.pids_limit_hits > 0;
  return c;
}

bool ResetHostMemoryPeak(const HostCgroup& cg) {
  if (cg.v2 || cg.memory.empty()) return false;
  std::ofstream out(cg.memory + "/memory.max_usage_in_bytes");
  out << "0";
  out.flush();
  return static_cast<bool>(out);
}

int CountHostCgroupProcesses(const HostCgroup& cg) {
  std::string text;
  if (!ReadSmallFile(cg.procs_dir() + "/cgroup.procs", &text)) return -1;
  std::istringstream in(text);
  int n = 0;
  for (pid_t pid; in >> pid;) ++n;
  return n;
}

bool KillHostCgroupProcesses(const HostCgroup& cg, pid_t init_pid, std::string_view container_id) {
  const std::string procs = cg.procs_dir() + "/cgroup.procs";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < deadline) {
    std::string text;
    if (!ReadSmallFile(procs, &text)) return false;
    std::istringstream in(text);
    bool any = false;
    for (pid_t pid; in >> pid;) {
      if (pid == init_pid) continue;
      any = true;
      int fd = PidfdOpen(pid);
      if (fd < 0) {
        if (errno == ESRCH) continue;  // gone already
        return false;                  // no pidfd support
      }
      // The pidfd pins the process: if /proc/<pid> still shows the container's cgroup now, the
      // signal goes to that process or to nobody (ESRCH), never to a reused pid.
      std::string own;
      bool ours = ReadSmallFile("/proc/" + std::to_string(pid) + "/cgroup", &own) &&
                  own.find(container_id) != std::string::npos;
      int rc = ours ? PidfdKill(fd) : 0;
      int err = errno;
      ::close(fd);
      if (ours && rc != 0 && err != ESRCH) return false;  // EPERM
    }
    if (!any) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

}  // namespace ci::container
