#include "runtime/init/fs_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/kernel/unique_fd.h"

namespace ci::runtime {
namespace {

// Returns false to stop the whole walk.
bool WalkDir(int dir_fd, const std::string& prefix, int depth, const FileVisitor& visit,
             SysError* error, bool* pruned) {
  int dup_fd = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) {
    *error = SysFail("dup directory fd");
    return false;
  }
  DIR* dir = ::fdopendir(dup_fd);
  if (dir == nullptr) {
    *error = SysFailErr(errno, "opendir " + prefix);
    ::close(dup_fd);
    return false;
  }
  // A dup shares the directory offset with dir_fd: an earlier walk (a session collects many
  // times) left it at the end.
  ::rewinddir(dir);
  bool keep_going = true;
  while (keep_going) {
    struct dirent* e = ::readdir(dir);
    if (e == nullptr) break;
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string rel = prefix.empty() ? name : prefix + "/" + name;
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (depth >= kMaxWalkDepth) {
        *pruned = true;
        continue;
      }
      UniqueFd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub.valid()) keep_going = WalkDir(sub.get(), rel, depth + 1, visit, error, pruned);
    } else if (S_ISREG(st.st_mode)) {
      // O_NONBLOCK: should the entry be swapped for a fifo after the lstat, open cannot hang.
      UniqueFd f(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      struct stat fst {};
      if (!f.valid() || ::fstat(f.get(), &fst) != 0 || !S_ISREG(fst.st_mode)) continue;
      keep_going = visit(rel, f.get(), static_cast<uint64_t>(fst.st_size));
    }
  }
  ::closedir(dir);
  return keep_going && error->ok();
}

}  // namespace

bool IsSafeRelativePath(const std::string& path) {
  if (path.empty() || path.front() == '/' || path.back() == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string comp = path.substr(start, end - start);
    if (comp.empty() || comp == "." || comp == ".." || comp.find('\0') != std::string::npos) {
      return false;
    }
    start = end + 1;
  }
  return true;
}

SysError CreateFileBelow(int root_dir, const std::string& path, int* fd) {
  if (!IsSafeRelativePath(path)) return SysFailErr(EINVAL, "unsafe path '" + path + "'");
  UniqueFd dir(::fcntl(root_dir, F_DUPFD_CLOEXEC, 0));
  if (!dir.valid()) return SysFail("dup workspace fd");
  size_t start = 0;
  for (size_t slash; (slash = path.find('/', start)) != std::string::npos; start = slash + 1) {
    const std::string comp = path.substr(start, slash - start);
    if (::mkdirat(dir.get(), comp.c_str(), 0755) != 0 && errno != EEXIST) {
      return SysFailErr(errno, "mkdir " + path.substr(0, slash));
    }
    UniqueFd next(
        ::openat(dir.get(), comp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.valid()) return SysFailErr(errno, "open directory " + path.substr(0, slash));
    dir = std::move(next);
  }
  const std::string name = path.substr(start);
  int f =
      ::openat(dir.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (f < 0) return SysFailErr(errno, "create " + path);
  ::fchmod(f, 0644);  // independent of the umask
  *fd = f;
  return SysOk();
}

SysError WalkRegularFiles(int root_dir, const FileVisitor& visit, bool* pruned) {
  SysError error;
  bool ignored = false;
  WalkDir(root_dir, "", 0, visit, &error, pruned != nullptr ? pruned : &ignored);
  return error;
}

}  // namespace ci::runtime
