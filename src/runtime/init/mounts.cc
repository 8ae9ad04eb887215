#include "runtime/init/mounts.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "core/proc_masks.h"
#include "runtime/init/mount_util.h"

namespace ci::runtime {

SysError MakeMountsPrivate() {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return SysFail("make / recursively private");
  }
  return SysOk();
}

SysError MountScratch(const Plan& plan, const std::string& newroot) {
  // uid=/gid= are read in the mounter's user namespace, where the sandbox user maps 1:1.
  CI_SYS_RETURN_IF_ERROR(MountTmpfs(newroot + "/workspace",
                                    "size=" + std::to_string(plan.workspace_bytes) +
                                        ",mode=0755,uid=" + std::to_string(plan.uid) +
                                        ",gid=" + std::to_string(plan.gid),
                                    MS_NOSUID | MS_NODEV));
  CI_SYS_RETURN_IF_ERROR(MountTmpfs(newroot + "/tmp",
                                    "size=" + std::to_string(plan.tmp_bytes) + ",mode=1777",
                                    MS_NOSUID | MS_NODEV));
  // /home/user, the sandbox user's home (E2B's), is the workspace under a second name: the same
  // files within the same size. An image root whose /home has no user/ gets none.
  const std::string home = newroot + "/home";
  if (::mkdir(home.c_str(), 0755) != 0 && errno != EEXIST)
    return SysFailErr(errno, "mkdir " + home);
  const std::string user = home + "/user";
  if (::mkdir(user.c_str(), 0755) != 0 && errno != EEXIST) {
    return errno == EROFS ? SysOk() : SysFailErr(errno, "mkdir " + user);
  }
  return BindWritable(newroot + "/workspace", user);
}

SysError MountProc(const std::string& newroot) {
  const std::string proc = newroot + "/proc";
  if (::mkdir(proc.c_str(), 0555) != 0) return SysFailErr(errno, "mkdir " + proc);
  // Works in a user namespace only because this process also owns the new pid namespace, and
  // only while the host's /proc has no locked overmounts (the kernel's mount_too_revealing()).
  if (::mount("proc", proc.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    return SysFailErr(errno, "mount proc on " + proc);
  }
  return SysOk();
}

SysError BuildDev(const Plan& plan, const std::string& newroot) {
  const std::string dev = newroot + "/dev";
  CI_SYS_RETURN_IF_ERROR(MountTmpfs(dev, "size=64k,mode=0755", MS_NOSUID | MS_NOEXEC));
  // Binds of the host's nodes: a tmpfs mounted in a user namespace is implicitly nodev, so mknod
  // there would give unusable nodes. No tty, ptmx or console: the sandbox has no terminal.
  for (const char* name : {"null", "zero", "full", "random", "urandom"}) {
    const std::string src = std::string("/dev/") + name;
    if (::access(src.c_str(), F_OK) != 0) continue;
    CI_SYS_RETURN_IF_ERROR(BindWritable(src, dev + "/" + name));
  }
  CI_SYS_RETURN_IF_ERROR(MountTmpfs(dev + "/shm",
                                    "size=" + std::to_string(plan.tmp_bytes) + ",mode=1777",
                                    MS_NOSUID | MS_NODEV | MS_NOEXEC));
  // POSIX message queues live in the sandbox's IPC namespace: mounted (as Docker does) so that
  // init can find and remove them when it puts the sandbox back (service_loop.cc).
  const std::string mqueue = dev + "/mqueue";
  if (::mkdir(mqueue.c_str(), 01777) != 0) return SysFailErr(errno, "mkdir " + mqueue);
  if (::mount("mqueue", mqueue.c_str(), "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    return SysFailErr(errno, "mount mqueue on " + mqueue);
  }
  const std::pair<const char*, const char*> links[] = {{"/proc/self/fd", "fd"},
                                                       {"/proc/self/fd/0", "stdin"},
                                                       {"/proc/self/fd/1", "stdout"},
                                                       {"/proc/self/fd/2", "stderr"}};
  for (const auto& [target, name] : links) {
    const std::string path = dev + "/" + name;
    if (::symlink(target, path.c_str()) != 0) return SysFailErr(errno, "symlink " + path);
  }
  // The device binds are separate mounts and stay writable; /dev itself gets no new entries.
  return RemountReadOnly(dev);
}

SysError MaskProcPaths(const std::string& newroot) {
  const std::string proc = newroot + "/proc";
  const std::string null_dev = newroot + "/dev/null";
  for (const char* name : kReadOnlyProcDirs) {
    const std::string path = proc + "/" + name;
    if (::access(path.c_str(), F_OK) != 0) continue;
    if (::mount(path.c_str(), path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      return SysFailErr(errno, "bind " + path + " onto itself");
    }
    CI_SYS_RETURN_IF_ERROR(RemountReadOnly(path));
  }
  for (const char* name : kMaskedProcFiles) {
    const std::string path = proc + "/" + name;
    if (::access(path.c_str(), F_OK) != 0) continue;
    if (::mount(null_dev.c_str(), path.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      return SysFailErr(errno, "mask " + path);
    }
  }
  for (const char* name : kEmptyProcDirs) {
    const std::string path = proc + "/" + name;
    if (::access(path.c_str(), F_OK) != 0) continue;
    CI_SYS_RETURN_IF_ERROR(MountTmpfs(path, "size=4k,mode=0555", MS_NOSUID | MS_NODEV | MS_NOEXEC));
    CI_SYS_RETURN_IF_ERROR(RemountReadOnly(path));
  }
  // No sysfs: an empty directory keeps tools that stat /sys quiet.
  const std::string sys = newroot + "/sys";
  if (::mkdir(sys.c_str(), 0555) != 0 && errno != EEXIST) return SysFailErr(errno, "mkdir " + sys);
  return SysOk();
}

SysError PivotRoot(const std::string& newroot) {
  if (::chdir(newroot.c_str()) != 0) return SysFailErr(errno, "chdir " + newroot);
  // With both arguments ".", the old root ends up mounted on top of the new one at "/"; the
  // detach below peels it off (see pivot_root(2), "new_root and put_old may be the same").
  if (::syscall(SYS_pivot_root, ".", ".") != 0) return SysFail("pivot_root");
  if (::umount2(".", MNT_DETACH) != 0) return SysFail("detach the old root");
  if (::chdir("/") != 0) return SysFail("chdir /");
  return SysOk();
}

SysError RemountRootReadOnly() {
  if (::mount(nullptr, "/", nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
              nullptr) != 0) {
    return SysFail("remount / read-only");
  }
  return SysOk();
}

}  // namespace ci::runtime
