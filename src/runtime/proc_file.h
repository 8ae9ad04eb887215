// Reading one small /proc/<pid>/ file inside the sandbox (init's side: no allocation, no
// exceptions).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

namespace ci::runtime {

// /proc/<pid>/<name> into buf (NUL-terminated, at most size - 1 bytes); false when unreadable.
inline bool ReadProcFile(long pid, const char* name, char* buf, size_t size) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%ld/%s", pid, name);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::read(fd, buf, size - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  return true;
}

}  // namespace ci::runtime
