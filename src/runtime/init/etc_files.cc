// The generated /etc of a "host" rootfs: the sandbox sees its own identity files and only the
// host configuration Python and its libraries need (never shadow, ssh keys, sudoers, ...).
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/init/mount_util.h"
#include "runtime/init/rootfs.h"

namespace ci::runtime {
namespace {

constexpr const char* kHostEtcAllowlist[] = {
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "matplotlibrc",
    "python3",     "python3.11", "fonts",        "mime.types",   "ssl",
};

}  // namespace

SysError BuildHostEtc(const Plan& plan, const std::string& newroot) {
  const std::string etc = newroot + "/etc";
  if (::mkdir(etc.c_str(), 0755) != 0) return SysFailErr(errno, "mkdir " + etc);
  const std::string uid = std::to_string(plan.uid);
  const std::string gid = std::to_string(plan.gid);
  CI_SYS_RETURN_IF_ERROR(
      WriteNewFile(etc + "/passwd",
                   "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                   "user:x:" +
                       uid + ":" + gid +
                       "::/home/user:/bin/bash\n"
                       "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"));
  CI_SYS_RETURN_IF_ERROR(
      WriteNewFile(etc + "/group", "root:x:0:\nuser:x:" + gid + ":\nnogroup:x:65534:\n"));
  CI_SYS_RETURN_IF_ERROR(WriteNewFile(etc + "/hosts",
                                      "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n"
                                      "127.0.1.1\t" +
                                          plan.hostname + "\n"));
  CI_SYS_RETURN_IF_ERROR(WriteNewFile(etc + "/hostname", plan.hostname + "\n"));
  CI_SYS_RETURN_IF_ERROR(WriteNewFile(etc + "/nsswitch.conf",
                                      "passwd: files\ngroup: files\nshadow: files\n"
                                      "hosts: files\nnetworks: files\nprotocols: files\n"
                                      "services: files\n"));
  CI_SYS_RETURN_IF_ERROR(WriteNewFile(etc + "/resolv.conf", ""));
  for (const char* name : kHostEtcAllowlist) {
    const std::string src = std::string("/etc/") + name;
    const std::string dst = etc + "/" + name;
    struct stat st {};
    if (::lstat(src.c_str(), &st) != 0) continue;
    // /etc/localtime is a symlink into /usr/share/zoneinfo, which resolves inside the sandbox.
    if (S_ISLNK(st.st_mode)) {
      CI_SYS_RETURN_IF_ERROR(ReplicateSymlink(src, dst));
    } else if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
      CI_SYS_RETURN_IF_ERROR(BindReadOnly(src, dst));
    }
  }
  return SysOk();
}

}  // namespace ci::runtime
