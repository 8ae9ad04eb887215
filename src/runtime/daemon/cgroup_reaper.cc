#include "runtime/daemon/cgroup_reaper.h"

#include <dirent.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "runtime/kernel/cgroups.h"

namespace ci::runtime {
namespace {

std::vector<std::string> SubDirectories(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_type == DT_DIR && e->d_name[0] != '.') out.push_back(e->d_name);
  }
  ::closedir(d);
  return out;
}

// The parent that named the cgroup (SandboxCgroupName: its pid): a shim, whose argv is exactly
// {"code-interpreter", "shim"} whatever the binary's path, or the fork server's zygote
// ({"code-interpreter", "fork"}), the parent of many sandboxes.
bool IsLiveParent(long pid) {
  std::string cmdline;
  if (!cgfs::ReadFile("/proc/" + std::to_string(pid) + "/cmdline", &cmdline)) return false;
  return cmdline == std::string("code-interpreter\0shim\0", 22) ||
         cmdline == std::string("code-interpreter\0fork\0", 22);
}

bool IsRandomName(const char* s) {
  return std::strlen(s) == 16 && std::strspn(s, "0123456789abcdef") == 16;
}

// Only names this runtime makes (SandboxCgroupName, or RandomCgroupName before it), so that
// nothing else in a shared CGROUP_ROOT is ever touched.
bool Orphaned(const std::string& dir, const std::string& name) {
  if (IsRandomName(name.c_str())) return cgfs::ReadWords(dir + "/cgroup.procs").empty();
  char* end = nullptr;
  long pid = std::strtol(name.c_str(), &end, 10);
  if (end == name.c_str() || *end != '-' || pid <= 0 || !IsRandomName(end + 1)) return false;
  return !IsLiveParent(pid);
}

}  // namespace

std::vector<std::string> ReapOrphanCgroups(const CgroupLayout& layout,
                                           std::vector<std::string>* failures) {
  std::vector<std::string> parents;
  if (layout.version == 2) {
    parents.push_back(layout.root);
  } else if (layout.version == 1) {
    for (const std::string& controller : SubDirectories(layout.root)) {
      parents.push_back(layout.root + "/" + controller + "/" + kCgroupParent);
    }
    // The freezer first: a frozen sandbox's tasks (Sandbox::Freeze) die, and leave the other
    // hierarchies' directories, only once KillAndRmdir thawed them.
    std::stable_partition(parents.begin(), parents.end(), [&](const std::string& p) {
      return p == layout.root + "/freezer/" + kCgroupParent;
    });
  }
  std::vector<std::string> removed;
  for (const std::string& parent : parents) {
    for (const std::string& name : SubDirectories(parent)) {
      const std::string dir = parent + "/" + name;
      if (!Orphaned(dir, name)) continue;
      if (cgfs::Exists(dir + "/cgroup.kill")) (void)cgfs::WriteFile(dir + "/cgroup.kill", "1");
      SysError e = cgfs::KillAndRmdir(dir, dir + "/cgroup.procs");
      if (e.ok()) {
        removed.push_back(dir);
      } else if (failures != nullptr) {
        failures->push_back(dir + ": " + e.what + ": " + std::strerror(e.err));
      }
    }
  }
  return removed;
}

}  // namespace ci::runtime
