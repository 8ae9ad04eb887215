// Shared cgroup helpers and version detection.
#include "runtime/cgroups.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "runtime/unique_fd.h"

namespace ci {
namespace cgfs {

SysError WriteFile(const std::string& path, const std::string& value) {
  // O_CREAT only matters for the temp-dir tests; on cgroupfs the control files already exist.
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return SysFailErr(errno, "open " + path);
  ssize_t n = ::write(fd.get(), value.data(), value.size());
  if (n < 0) return SysFailErr(errno, "write '" + value + "' to " + path);
  if (static_cast<size_t>(n) != value.size()) return SysFailErr(EIO, "short write to " + path);
  return SysOk();
}

bool ReadFile(const std::string& path, std::string* out) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  out->clear();
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    out->append(buf, static_cast<size_t>(n));
  }
}

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

bool ReadKey(const std::string& path, const std::string& key, uint64_t* value) {
  std::string text;
  if (!ReadFile(path, &text)) return false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 &&
        line[key.size()] == ' ') {
      *value = std::strtoull(line.c_str() + key.size() + 1, nullptr, 10);
      return true;
    }
    pos = end + 1;
  }
  return false;
}

bool ReadU64(const std::string& path, uint64_t* value) {
  std::string text;
  if (!ReadFile(path, &text) || text.empty()) return false;
  *value = std::strtoull(text.c_str(), nullptr, 10);
  return true;
}

SysError KillAndRmdir(const std::string& dir, const std::string& procs_file) {
  if (!Exists(dir)) return SysOk();
  int err = 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string procs;
    if (ReadFile(procs_file, &procs)) {
      char* p = procs.data();
      while (*p != '\0') {
        char* end = nullptr;
        long pid = std::strtol(p, &end, 10);
        if (end == p) break;
        if (pid > 0) ::kill(static_cast<pid_t>(pid), SIGKILL);
        p = end;
        while (*p == '\n') ++p;
      }
    }
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return SysOk();
    err = errno;
    if (err != EBUSY) break;
    // A killed task stays in the cgroup until it is fully torn down (mm freed, reaped).
    struct timespec ts = {0, 10 * 1000 * 1000};
    ::nanosleep(&ts, nullptr);
  }
  return SysFailErr(err, "rmdir " + dir);
}

}  // namespace cgfs

std::unique_ptr<Cgroup> MakeCgroup(const CgroupLayout& layout, std::string name) {
  if (layout.version == 2) return MakeCgroupV2(layout.root, std::move(name));
  return MakeCgroupV1(layout.root, std::move(name));
}

bool DetectCgroups(const std::string& configured_root, CgroupLayout* out, std::string* why_not) {
  const std::string root = configured_root.empty() ? "/sys/fs/cgroup" : configured_root;
  struct statfs st {};
  bool is_cgroup2 = ::statfs(root.c_str(), &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC;
  std::string controllers;
  if ((is_cgroup2 || !configured_root.empty()) &&
      cgfs::ReadFile(root + "/cgroup.controllers", &controllers)) {
    auto has = [&](const char* c) {
      std::string padded = " " + controllers;
      for (char& ch : padded) ch = ch == '\n' ? ' ' : ch;
      padded += " ";
      return padded.find(std::string(" ") + c + " ") != std::string::npos;
    };
    if (has("memory") && has("pids")) {
      *out = {2, root};
      return true;
    }
  }
  if (cgfs::Exists(root + "/memory/memory.limit_in_bytes") && cgfs::Exists(root + "/pids")) {
    *out = {1, root};
    return true;
  }
  *why_not = "no usable cgroup controllers under " + root +
             ": need cgroup v2 with memory and pids enabled, or v1 memory and pids mounts";
  return false;
}

std::string RandomCgroupName() {
  unsigned char bytes[8] = {};
  if (::getrandom(bytes, sizeof bytes, 0) != sizeof bytes) {
    // getrandom cannot fail for 8 bytes once the pool is initialised; keep a unique fallback.
    unsigned long long v = static_cast<unsigned long long>(::getpid()) ^
                           static_cast<unsigned long long>(::time(nullptr)) << 20;
    for (auto& b : bytes) b = static_cast<unsigned char>(v), v >>= 8;
  }
  static const char kHex[] = "0123456789abcdef";
  std::string name;
  for (unsigned char b : bytes) {
    name += kHex[b >> 4];
    name += kHex[b & 15];
  }
  return name;
}

}  // namespace ci
