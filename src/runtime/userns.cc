#include "runtime/userns.h"

#include <grp.h>
#include <unistd.h>

#include <string>

#include "runtime/cgroups.h"

namespace ci {

SysError WriteIdMaps(pid_t child, uint32_t uid, uint32_t gid) {
  const std::string proc = "/proc/" + std::to_string(child);
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

SysError SwitchToSandboxUser(uint32_t uid, uint32_t gid) {
  // Order: groups and gid need CAP_SETGID, which setresuid to non-root takes away.
  if (::setgroups(0, nullptr) != 0) return SysFail("setgroups(0)");
  if (::setresgid(gid, gid, gid) != 0) return SysFail("setresgid");
  if (::setresuid(uid, uid, uid) != 0) return SysFail("setresuid");
  return SysOk();
}

}  // namespace ci
