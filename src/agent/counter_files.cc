#include "agent/counter_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "agent/agent_wire.h"

namespace ci::agent {
namespace {

bool ReadFile(const std::string& path, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out->clear();
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out->append(buf, static_cast<size_t>(n));
  ::close(fd);
  return n == 0;
}

// A file's section: its base name, then its lines, the last one ended as the shell's echo does.
void Section(std::string& out, const std::string& name, const std::string& content) {
  out += '@';
  out += name.substr(name.rfind('/') + 1);
  out += '\n';
  out += content;
  if (!content.empty() && content.back() != '\n') out += '\n';
}

// /proc/<pid>/stat after "(comm) ": utime, stime, cutime and cstime are its 12th to 15th fields.
uint64_t StatTicks(const std::string& stat) {
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  const char* p = stat.c_str() + paren + 1;
  uint64_t ticks = 0;
  for (int field = 1; field <= 15 && *p != '\0'; ++field) {
    while (*p == ' ') ++p;
    char* end = nullptr;
    unsigned long long v = std::strtoull(p, &end, 10);
    if (field >= 12) ticks += v;
    p = end == p ? p + std::strcspn(p, " ") : end;
  }
  return ticks;
}

}  // namespace

std::string ReadCounterFiles(uint8_t extras, const std::string& root, const std::string& proc) {
  std::string out, content;
  for (const char* file : kCounterFiles) {
    if (ReadFile(root + "/" + file, &content)) Section(out, file, content);
  }
  if (extras & kCountProcesses) {
    for (const char* file : {"cgroup.procs", "pids/cgroup.procs"}) {
      if (!ReadFile(root + "/" + file, &content)) continue;
      size_t lines = 0;
      for (char c : content) lines += c == '\n';
      Section(out, "cgroup.procs", std::to_string(lines));
      break;
    }
  }
  if (extras & kProcessesCpu) {
    uint64_t ticks = 0;
    if (DIR* d = ::opendir(proc.c_str())) {
      const std::string self = std::to_string(::getpid());
      while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || self == e->d_name) continue;
        if (ReadFile(proc + "/" + e->d_name + "/stat", &content)) ticks += StatTicks(content);
      }
      ::closedir(d);
    }
    Section(out, "procs.cpu", std::to_string(ticks));
  }
  return out;
}

}  // namespace ci::agent
