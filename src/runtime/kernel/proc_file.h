// Reading one small /proc/<pid>/ file inside the sandbox (init's side: no allocation, no
// exceptions).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

// utime + stime + cutime + cstime of one process, in clock ticks; 0 when it is gone.
inline uint64_t ProcessTicks(long pid) {
  char buf[1024];
  if (!ReadProcFile(pid, "stat", buf, sizeof buf)) return 0;
  // After the last ')' (the name may hold anything): field 3 (state) onwards; utime is field 14.
  char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0;
  uint64_t sum = 0;
  int field = 2;
  char* save = nullptr;
  for (char* tok = strtok_r(p + 1, " ", &save); tok != nullptr;
       tok = strtok_r(nullptr, " ", &save)) {
    if (++field >= 14 && field <= 17) sum += std::strtoull(tok, nullptr, 10);
    if (field == 17) break;
  }
  return sum;
}

// CPU time one process has used so far, in ms, to the nanosecond where the kernel keeps it
// (/proc/<pid>/schedstat; stat's clock ticks are 10 ms coarse); 0 when it is gone.
inline uint64_t ProcessCpuMs(long pid) {
  char buf[128];
  if (ReadProcFile(pid, "schedstat", buf, sizeof buf))
    return std::strtoull(buf, nullptr, 10) / 1000000;
  static const long hz = ::sysconf(_SC_CLK_TCK);
  return ProcessTicks(pid) * 1000 / static_cast<uint64_t>(hz);
}

}  // namespace ci::runtime
