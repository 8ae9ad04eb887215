#include "runtime/daemon/sandbox_oom.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "runtime/kernel/cgroups.h"

namespace ci::runtime {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The last path component of the line of /proc/<pid>/cgroup that names `want` ("0::" for v2,
// ":memory:" for v1), or "".
std::string LeafName(const std::string& cgroup_file, const std::string& want) {
  std::istringstream lines(cgroup_file);
  for (std::string line; std::getline(lines, line);) {
    size_t at =
        want == "0::" ? (line.rfind("0::", 0) == 0 ? 0 : std::string::npos) : line.find(want);
    if (at == std::string::npos) continue;
    size_t slash = line.rfind('/');
    return slash == std::string::npos ? "" : line.substr(slash + 1);
  }
  return "";
}

std::string Want(const CgroupLayout& layout) { return layout.version == 2 ? "0::" : ":memory:"; }

// The /proc/<pid>/cgroup contents of the shim's first descendant in another cgroup, or "".
std::string CgroupFileBelowShim(pid_t shim_pid) {
  const std::string shim_cgroup = Slurp("/proc/" + std::to_string(shim_pid) + "/cgroup");
  std::vector<std::string> queue = {std::to_string(shim_pid)};
  for (size_t i = 0; i < queue.size() && i < 16; ++i) {
    std::istringstream children(Slurp("/proc/" + queue[i] + "/task/" + queue[i] + "/children"));
    for (std::string child; children >> child;) {
      std::string own = Slurp("/proc/" + child + "/cgroup");
      if (own.empty() || own == shim_cgroup) {
        queue.push_back(child);
        continue;
      }
      return own;
    }
  }
  return "";
}

// The counter file of the cgroup named `name`, or "".
std::string OomFileOf(const std::string& name, const CgroupLayout& layout) {
  if (name.empty()) return "";
  std::string file = layout.version == 2 ? layout.root + "/" + name + "/memory.events"
                                         : layout.root + "/memory/" + kCgroupParent + "/" + name +
                                               "/memory.oom_control";
  return cgfs::Exists(file) ? file : "";
}

}  // namespace

std::string FindSandboxCgroupName(pid_t shim_pid, pid_t init_pid, const CgroupLayout& layout) {
  if (layout.version != 1 && layout.version != 2) return "";
  const std::string file = shim_pid > 0 ? CgroupFileBelowShim(shim_pid)
                                        : Slurp("/proc/" + std::to_string(init_pid) + "/cgroup");
  return LeafName(file, Want(layout));
}

std::string FindSandboxOomFileOfInit(pid_t init_pid, const CgroupLayout& layout) {
  return OomFileOf(FindSandboxCgroupName(0, init_pid, layout), layout);
}

std::string FindSandboxOomFile(pid_t shim_pid, const CgroupLayout& layout) {
  return OomFileOf(FindSandboxCgroupName(shim_pid, 0, layout), layout);
}

uint64_t ReadOomKills(const std::string& file) {
  uint64_t v = 0;
  if (file.empty() || !cgfs::ReadKey(file, "oom_kill", &v)) return 0;
  return v;
}

}  // namespace ci::runtime
