#include "runtime/init/rootfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/init/mount_util.h"

namespace ci::runtime {
namespace {

// Entries the sandbox gets fresh instead of from the image or the host.
bool IsProvidedBySandbox(const std::string& name) {
  return name == "proc" || name == "dev" || name == "sys" || name == "tmp" || name == "workspace";
}

SysError BindHostRoot(const Plan& plan, const std::string& newroot) {
  CI_SYS_RETURN_IF_ERROR(BindReadOnly("/usr", newroot + "/usr"));
  for (const char* name : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
    const std::string src = std::string("/") + name;
    struct stat st {};
    if (::lstat(src.c_str(), &st) != 0) continue;  // not every host has lib32/libx32
    if (S_ISLNK(st.st_mode)) {
      CI_SYS_RETURN_IF_ERROR(ReplicateSymlink(src, newroot + src));
    } else if (S_ISDIR(st.st_mode)) {
      CI_SYS_RETURN_IF_ERROR(BindReadOnly(src, newroot + src));
    }
  }
  return BuildHostEtc(plan, newroot);
}

SysError BindImageRoot(int rootfs_fd, const std::string& newroot) {
  int dup_fd = ::fcntl(rootfs_fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return SysFail("dup rootfs fd");
  DIR* dir = ::fdopendir(dup_fd);
  if (dir == nullptr) {
    int err = errno;
    ::close(dup_fd);
    return SysFailErr(err, "read rootfs directory");
  }
  // Paths through the magic link reach the directory opened before the staging tmpfs was mounted.
  const std::string base = "/proc/self/fd/" + std::to_string(rootfs_fd) + "/";
  SysError result;
  for (;;) {
    errno = 0;
    struct dirent* e = ::readdir(dir);
    if (e == nullptr) {
      if (errno != 0) result = SysFail("list the rootfs directory");
      break;
    }
    const std::string name = e->d_name;
    if (name == "." || name == ".." || IsProvidedBySandbox(name)) continue;
    struct stat st {};
    if (::fstatat(rootfs_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      result = ReplicateSymlink(base + name, newroot + "/" + name);
    } else if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
      result = BindReadOnly(base + name, newroot + "/" + name);
    }
    if (!result.ok()) break;
  }
  ::closedir(dir);
  return result;
}

}  // namespace

SysError OpenRootfsDir(const Plan& plan, int* fd) {
  *fd = -1;
  if (plan.rootfs == "host") return SysOk();
  // O_RDONLY, not O_PATH: the directory is listed through this fd (getdents fails on O_PATH).
  *fd = ::open(plan.rootfs.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (*fd < 0) return SysFailErr(errno, "open rootfs " + plan.rootfs);
  return SysOk();
}

SysError BuildRootfs(const Plan& plan, int rootfs_fd, const std::string& newroot) {
  // The root tmpfs only holds mount points, symlinks and the generated /etc; it is remounted
  // read-only after pivot_root.
  CI_SYS_RETURN_IF_ERROR(MountTmpfs(newroot, "size=4m,mode=0755", MS_NOSUID | MS_NODEV));
  if (rootfs_fd < 0) return BindHostRoot(plan, newroot);
  return BindImageRoot(rootfs_fd, newroot);
}

}  // namespace ci::runtime
