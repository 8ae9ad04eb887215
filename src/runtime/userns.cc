#include "runtime/userns.h"

#include <grp.h>
#include <unistd.h>

#include <string>

#include "runtime/cgroups.h"

namespace ci {

SysError WriteIdMaps(pid_t child, uint32_t uid, uint32_t gid, bool rootless) {
  const std::string proc = "/proc/" + std::to_string(child);
  if (rootless) {
    CI_SYS_RETURN_IF_ERROR(cgfs::WriteFile(
        proc + "/uid_map", std::to_string(uid) + " " + std::to_string(::geteuid()) + " 1\n"));
    // Without CAP_SETGID in the parent namespace, gid_map is writable only once setgroups(2) is
    // disabled for good (user_namespaces(7)); otherwise the sandbox could drop a group that
    // denies it access.
    CI_SYS_RETURN_IF_ERROR(cgfs::WriteFile(proc + "/setgroups", "deny"));
    return cgfs::WriteFile(proc + "/gid_map",
                           std::to_string(gid) + " " + std::to_string(::getegid()) + " 1\n");
  }
  CI_SYS_RETURN_IF_ERROR(cgfs::WriteFile(
      proc + "/uid_map", "0 65534 1\n" + std::to_string(uid) + " " + std::to_string(uid) + " 1\n"));
  return cgfs::WriteFile(proc + "/gid_map",
                         "0 65534 1\n" + std::to_string(gid) + " " + std::to_string(gid) + " 1\n");
}

SysError BecomeNamespaceRoot() {
  if (::setresgid(0, 0, 0) != 0) return SysFail("setresgid 0 in the user namespace");
  if (::setresuid(0, 0, 0) != 0) return SysFail("setresuid 0 in the user namespace");
  return SysOk();
}

SysError SwitchToSandboxUser(uint32_t uid, uint32_t gid, bool rootless) {
  // Order: groups and gid need CAP_SETGID, which setresuid to non-root takes away.
  if (!rootless && ::setgroups(0, nullptr) != 0) return SysFail("setgroups(0)");
  if (::setresgid(gid, gid, gid) != 0) return SysFail("setresgid");
  if (::setresuid(uid, uid, uid) != 0) return SysFail("setresuid");
  return SysOk();
}

}  // namespace ci
