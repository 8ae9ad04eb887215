#include "agent/process_attributes.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ci::agent {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// sched_getattr's answer (SCHED_ATTR_SIZE_VER1): what sched_setattr can set beyond the policy and
// priority /proc/PID/stat shows: a custom time slice of SCHED_OTHER (sched_runtime, kernel
// 6.12+), deadline parameters, utilization clamps, and its flags.
struct SchedAttr {
  uint32_t size;
  uint32_t policy;
  uint64_t flags;
  int32_t nice;
  uint32_t priority;
  uint64_t runtime;
  uint64_t deadline;
  uint64_t period;
  uint32_t util_min;
  uint32_t util_max;
};

std::string SchedAttrLine(pid_t pid) {
  SchedAttr a{};
  if (::syscall(SYS_sched_getattr, pid, &a, sizeof a, 0) != 0) {
    return std::string("sched_attr unreadable: ") + std::strerror(errno);
  }
  std::ostringstream s;
  s << "sched_attr policy " << a.policy << " flags " << a.flags << " nice " << a.nice
    << " priority " << a.priority << " runtime " << a.runtime << " deadline " << a.deadline
    << " period " << a.period << " util " << a.util_min << "-" << a.util_max;
  return s.str();
}

}  // namespace

std::vector<std::string> StatFields(pid_t pid) {
  std::string stat = Slurp("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  std::vector<std::string> fields;
  if (close == std::string::npos) return fields;
  std::istringstream rest(stat.substr(close + 1));
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

std::string ProcessAttributes(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::vector<std::string> stat = StatFields(pid);
  if (stat.size() < 39) return "";
  // priority, nice, threads, rt_priority, policy
  std::string a = stat[15] + " " + stat[16] + " " + stat[17] + " " + stat[37] + " " + stat[38];
  std::istringstream status(Slurp(proc + "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) a += "\n" + line;
  }
  long ioprio = ::syscall(SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, pid);
  a += "\nioprio " + std::to_string(ioprio) + "\n" + SchedAttrLine(pid) + "\n" +
       Slurp(proc + "/limits");
  return a;
}

std::string AttributeChange(const std::string& before, const std::string& now) {
  if (now == before) return "";
  size_t at = 0;
  while (at < now.size() && at < before.size() && now[at] == before[at]) ++at;
  const size_t line = before.rfind('\n', at == 0 ? 0 : at - 1);
  const size_t from = line == std::string::npos ? 0 : line + 1;
  return before.substr(from, before.find('\n', at) - from) + " -> " +
         now.substr(from, now.find('\n', at) - from);
}

}  // namespace ci::agent
