#include "daemon/bootstrap/cgroup_nesting.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace ci::daemon {
namespace {

bool Read(const std::string& path, std::string& out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream s;
  s << in.rdbuf();
  out = s.str();
  return true;
}

// One write(2), so the kernel's error is what we see.
bool Write(const std::string& path, const std::string& text, std::string& error) {
  FILE* f = std::fopen(path.c_str(), "we");
  if (f == nullptr) {
    error = path + ": " + std::strerror(errno);
    return false;
  }
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fflush(f) == 0 && ok;
  int saved = errno;
  std::fclose(f);
  if (!ok) error = "writing '" + text + "' to " + path + ": " + std::strerror(saved);
  return ok;
}

// Moves every process of `root` into root/init; a process that exits meanwhile is no error.
void MoveProcesses(const std::string& root) {
  std::string procs;
  if (!Read(root + "/cgroup.procs", procs)) return;
  std::istringstream in(procs);
  std::string pid, ignored;
  while (in >> pid) Write(root + "/init/cgroup.procs", pid, ignored);
}

}  // namespace

Result<CgroupNesting> EnableCgroupNesting(const std::string& root, const std::string& self_cgroup) {
  std::string controllers;
  if (!Read(root + "/cgroup.controllers", controllers)) {
    // cgroup v1: each controller is its own hierarchy under root.
    if (::access((root + "/memory").c_str(), W_OK) != 0) {
      return Status::Error(root +
                           "/memory is not writable (cgroup v1): is the container "
                           "privileged?");
    }
    return CgroupNesting{"1", "", ""};
  }
  // Our own cgroup: the namespace's root ("0::/") in a cgroup namespace of our own; with the
  // host's (--cgroupns=host) the container's cgroup as the host names it, whose processes are
  // ours alone (never the root's: those are the host's).
  std::string self;
  if (!Read(self_cgroup, self) || self.rfind("0::/", 0) != 0) return CgroupNesting{"2", "", ""};
  const std::string own = self.substr(3, self.find('\n') - 3);  // npos - 3: to the end
  const std::string dir = own == "/" ? root : root + own;
  if (!Read(dir + "/cgroup.controllers", controllers)) {
    return Status::Error("cgroup v2: cannot read " + dir + "/cgroup.controllers");
  }
  std::istringstream words(controllers);
  std::string word, enable, names;
  while (words >> word) {
    enable += (enable.empty() ? "+" : " +") + word;
    names += (names.empty() ? "" : " ") + word;
  }
  if (enable.empty()) return CgroupNesting{"2", "", own};
  if (::mkdir((dir + "/init").c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::Error("cgroup v2: creating " + dir + "/init: " + std::strerror(errno));
  }
  // Processes may be forked between the move and the write: try a few times, as dind does.
  std::string error;
  for (int attempt = 0; attempt < 5; ++attempt) {
    MoveProcesses(dir);
    if (Write(dir + "/cgroup.subtree_control", enable, error)) {
      return CgroupNesting{"2", names, own};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return Status::Error("cgroup v2: enabling the controllers for nested containers: " + error);
}

}  // namespace ci::daemon
