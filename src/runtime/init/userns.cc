#include "runtime/init/userns.h"

#include <grp.h>
#include <sys/fsuid.h>
#include <unistd.h>

namespace ci::runtime {

SysError BecomeNamespaceRoot() {
  if (::setresgid(0, 0, 0) != 0) return SysFail("setresgid 0 in the user namespace");
  if (::setresuid(0, 0, 0) != 0) return SysFail("setresuid 0 in the user namespace");
  return SysOk();
}

SysError SwitchToInitUser(uint32_t uid, uint32_t gid, bool two_ids) {
  if (!two_ids) {
    if (::setresgid(gid, gid, gid) != 0) return SysFail("setresgid");
    if (::setresuid(uid, uid, uid) != 0) return SysFail("setresuid");
    return SysOk();
  }
  if (::setgroups(0, nullptr) != 0) return SysFail("setgroups(0)");
  // setfs[ug]id report the previous id, never an error: read the new one back to check.
  ::setfsgid(gid);
  if (static_cast<uint32_t>(::setfsgid(gid)) != gid) return SysFailErr(EPERM, "setfsgid");
  ::setfsuid(uid);
  if (static_cast<uint32_t>(::setfsuid(uid)) != uid) return SysFailErr(EPERM, "setfsuid");
  return SysOk();
}

SysError SwitchToSandboxUser(uint32_t uid, uint32_t gid) {
  // Order: groups and gid need CAP_SETGID, which the capability drop afterwards takes away.
  if (::setgroups(0, nullptr) != 0) return SysFail("setgroups(0)");
  if (::setresgid(gid, gid, gid) != 0) return SysFail("setresgid");
  if (::setresuid(uid, uid, uid) != 0) return SysFail("setresuid");
  return SysOk();
}

}  // namespace ci::runtime
