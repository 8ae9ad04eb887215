#include "runtime/init/mount_util.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <climits>

#include "runtime/kernel/unique_fd.h"

namespace ci::runtime {
namespace {

// The per-mount flags the kernel locks when a mount is inherited into a user namespace.
unsigned long LockedFlags(const std::string& path) {
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0) return 0;
  unsigned long flags = 0;
  if (st.f_flag & ST_NOSUID) flags |= MS_NOSUID;
  if (st.f_flag & ST_NODEV) flags |= MS_NODEV;
  if (st.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (st.f_flag & ST_NOATIME) flags |= MS_NOATIME;
  if (st.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (st.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  return flags;
}

}  // namespace

SysError MakeMountPointLike(const std::string& src, const std::string& dst) {
  struct stat st {};
  if (::stat(src.c_str(), &st) != 0) return SysFailErr(errno, "stat " + src);
  if (S_ISDIR(st.st_mode)) {
    if (::mkdir(dst.c_str(), 0755) != 0 && errno != EEXIST) {
      return SysFailErr(errno, "mkdir " + dst);
    }
    return SysOk();
  }
  UniqueFd fd(::open(dst.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd.valid()) return SysFailErr(errno, "create mount point " + dst);
  return SysOk();
}

SysError BindReadOnly(const std::string& src, const std::string& dst) {
  CI_SYS_RETURN_IF_ERROR(MakeMountPointLike(src, dst));
  if (::mount(src.c_str(), dst.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return SysFailErr(errno, "bind " + src + " onto " + dst);
  }
  return RemountReadOnly(dst);
}

SysError BindWritable(const std::string& src, const std::string& dst) {
  CI_SYS_RETURN_IF_ERROR(MakeMountPointLike(src, dst));
  if (::mount(src.c_str(), dst.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return SysFailErr(errno, "bind " + src + " onto " + dst);
  }
  return SysOk();
}

SysError RemountReadOnly(const std::string& path) {
  unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | LockedFlags(path);
  if (::mount(nullptr, path.c_str(), nullptr, flags, nullptr) != 0) {
    return SysFailErr(errno, "remount read-only " + path);
  }
  return SysOk();
}

SysError ReplicateSymlink(const std::string& src, const std::string& dst) {
  char target[PATH_MAX];
  ssize_t n = ::readlink(src.c_str(), target, sizeof target - 1);
  if (n < 0) return SysFailErr(errno, "readlink " + src);
  target[n] = '\0';
  if (::symlink(target, dst.c_str()) != 0) return SysFailErr(errno, "symlink " + dst);
  return SysOk();
}

SysError MountTmpfs(const std::string& dst, const std::string& options, unsigned long flags) {
  if (::mkdir(dst.c_str(), 0755) != 0 && errno != EEXIST) return SysFailErr(errno, "mkdir " + dst);
  if (::mount("tmpfs", dst.c_str(), "tmpfs", flags, options.c_str()) != 0) {
    return SysFailErr(errno, "mount tmpfs (" + options + ") on " + dst);
  }
  return SysOk();
}

SysError WriteNewFile(const std::string& path, const std::string& content) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd.valid()) return SysFailErr(errno, "create " + path);
  if (::write(fd.get(), content.data(), content.size()) != static_cast<ssize_t>(content.size())) {
    return SysFailErr(errno, "write " + path);
  }
  return SysOk();
}

}  // namespace ci::runtime
