#include "core/sandbox_wipe.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ci {
namespace {

// Deeper trees are not walked: the container is not recycled (the agent's stack stays small).
constexpr int kMaxDepth = 256;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_;
};

// The names in a directory, "." and ".." left out; false on a read error.
bool ListNames(int dir_fd, std::vector<std::string>* names) {
  int copy = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return false;
  DIR* d = ::fdopendir(copy);
  if (d == nullptr) {
    ::close(copy);
    return false;
  }
  ::rewinddir(d);
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      names->emplace_back(e->d_name);
    }
  }
  bool ok = errno == 0;
  ::closedir(d);
  return ok;
}

// Removes everything below `dir_fd`; nothing else runs meanwhile (every other process is dead),
// so what lstat says of an entry holds. Directories the program made unreadable are its own: the
// owner may chmod them back.
bool RemoveBelow(int dir_fd, const std::string& where, int depth, std::string* error) {
  if (depth > kMaxDepth) {
    *error = where + ": nested deeper than " + std::to_string(kMaxDepth) + " directories";
    return false;
  }
  std::vector<std::string> names;
  if (!ListNames(dir_fd, &names)) {
    *error = Errno("listing " + where);
    return false;
  }
  for (const std::string& name : names) {
    const std::string path = where + "/" + name;
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      *error = Errno("stat " + path);
      return false;
    }
    if (S_ISDIR(st.st_mode)) {
      if ((st.st_mode & 0700) != 0700 && ::fchmodat(dir_fd, name.c_str(), 0700, 0) != 0) {
        *error = Errno("chmod " + path);
        return false;
      }
      Fd child(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!child.valid()) {
        *error = Errno("open " + path);
        return false;
      }
      if (!RemoveBelow(child.get(), path, depth + 1, error)) return false;
    }
    if (::unlinkat(dir_fd, name.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) != 0) {
      *error = Errno("remove " + path);
      return false;
    }
  }
  return true;
}

// Extended attributes the program set on the root itself (its entries took theirs with them).
bool RemoveXattrs(int fd, const std::string& where, std::string* error) {
  char names[4096];
  ssize_t n = ::flistxattr(fd, names, sizeof names);
  if (n < 0) return errno == ENOTSUP || (*error = Errno("listxattr " + where), false);
  for (ssize_t i = 0; i < n; i += static_cast<ssize_t>(std::strlen(names + i)) + 1) {
    if (::fremovexattr(fd, names + i) != 0) {
      *error = Errno(std::string("removexattr ") + (names + i) + " of " + where);
      return false;
    }
  }
  return true;
}

// The ids in the second column of a /proc/sysvipc table.
std::vector<int> SysvIds(const char* table) {
  std::ifstream in(table);
  std::vector<int> ids;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    long long key = 0;
    int id = -1;
    if (fields >> key >> id) ids.push_back(id);
  }
  return ids;
}

// Mount points are escaped in mountinfo (space as \040 and so on).
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8)));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

bool OnlyThisProcessLeft(pid_t spared) {
  Fd proc(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::vector<std::string> names;
  if (!proc.valid() || !ListNames(proc.get(), &names)) return false;
  const std::string self = std::to_string(::getpid()), kept = std::to_string(spared);
  return std::none_of(names.begin(), names.end(), [&](const std::string& n) {
    return !n.empty() && std::all_of(n.begin(), n.end(), ::isdigit) && n != self && n != kept;
  });
}

std::vector<WipeRoot> RecordRoots(const std::vector<std::string>& paths, std::string* error) {
  std::vector<WipeRoot> roots;
  for (const std::string& p : paths) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;  // not in this container (Docker's /dev/mqueue, say)
      *error = Errno("stat " + p);
      return {};
    }
    if (!S_ISDIR(st.st_mode)) {
      *error = p + " is not a directory";
      return {};
    }
    roots.push_back({p, st.st_mode & 07777, st.st_uid, st.st_gid});
  }
  return roots;
}

bool WipeRoots(const std::vector<WipeRoot>& roots, std::string* error) {
  for (const WipeRoot& r : roots) {
    Fd fd(::open(r.path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) {
      *error = Errno("open " + r.path);
      return false;
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || st.st_uid != r.uid || st.st_gid != r.gid) {
      *error = r.path + " changed owner";
      return false;
    }
    if ((st.st_mode & 07777) != r.mode && ::fchmod(fd.get(), r.mode) != 0) {
      // Root-owned roots (/tmp) cannot have been changed by the program: this is the agent's own.
      *error = Errno("chmod " + r.path);
      return false;
    }
    if (!RemoveBelow(fd.get(), r.path, 0, error) || !RemoveXattrs(fd.get(), r.path, error)) {
      return false;
    }
    std::vector<std::string> left;
    if (!ListNames(fd.get(), &left) || !left.empty()) {
      *error = r.path + " is not empty after the wipe";
      return false;
    }
  }
  return true;
}

bool RemoveSysvIpc(std::string* error) {
  for (int id : SysvIds("/proc/sysvipc/shm")) ::shmctl(id, IPC_RMID, nullptr);
  for (int id : SysvIds("/proc/sysvipc/sem")) ::semctl(id, 0, IPC_RMID);
  for (int id : SysvIds("/proc/sysvipc/msg")) ::msgctl(id, IPC_RMID, nullptr);
  for (const char* table : {"/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg"}) {
    if (!SysvIds(table).empty()) {
      *error = std::string(table) + " still lists an object";
      return false;
    }
  }
  return true;
}

std::vector<std::string> UncoveredWritableMounts(const std::vector<WipeRoot>& roots) {
  std::vector<std::string> uncovered;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root mount-point options [optional fields] - fstype source super
    std::istringstream fields(line);
    std::string id, parent, dev, root, point, options, field, fstype;
    fields >> id >> parent >> dev >> root >> point >> options;
    while (fields >> field && field != "-") {
    }
    fields >> fstype;
    point = Unescape(point);
    std::istringstream opts(options);
    bool read_only = false;
    while (std::getline(opts, field, ',')) read_only = read_only || field == "ro";
    if (read_only) continue;
    // Kernel interfaces whose writable parts belong to processes (which are gone) or are
    // mounted read-only where it matters (/proc/sys, /sys/fs/cgroup).
    if (fstype == "proc" || fstype == "sysfs" || fstype == "cgroup" || fstype == "cgroup2" ||
        fstype == "devpts") {
      continue;
    }
    if (std::any_of(roots.begin(), roots.end(),
                    [&](const WipeRoot& r) { return r.path == point; })) {
      continue;
    }
    // Device nodes bound in (the local runtime's /dev/null, zero, full, random, urandom) and
    // masked files (/dev/null bound over them, Docker's MaskedPaths): writes store nothing.
    struct stat st {};
    if (::stat(point.c_str(), &st) == 0 && S_ISCHR(st.st_mode)) continue;
    if (point == "/" || ::access(point.c_str(), W_OK) == 0) uncovered.push_back(point);
  }
  return uncovered;
}

}  // namespace ci
