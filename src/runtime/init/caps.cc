#include "runtime/init/caps.h"

#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <initializer_list>
#include <string>

namespace ci::runtime {

SysError DropBoundingSet() {
  // Walk until the kernel says EINVAL: it knows more capabilities than our headers may.
  for (int cap = 0; cap < 64; ++cap) {
    if (::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0) break;
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      return SysFailErr(errno, "drop capability " + std::to_string(cap) + " from bounding set");
    }
  }
  return SysOk();
}

SysError LockSecurebits() {
  constexpr unsigned long kBits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                  SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                                  SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
  if (::prctl(PR_SET_SECUREBITS, kBits, 0, 0, 0) != 0) return SysFail("PR_SET_SECUREBITS");
  return SysOk();
}

namespace {

// Permitted and effective = exactly `keep`, no ambient capabilities (inheritable stays empty).
// The capset system call itself, not libcap's: it runs in each program's fork, where every
// allocation copies pages of init's heap.
SysError SetOnlyCapabilities(std::initializer_list<int> keep, const char* what) {
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) {
    return SysFail("clear ambient capabilities");
  }
  __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  for (int cap : keep) {
    data[CAP_TO_INDEX(cap)].permitted |= CAP_TO_MASK(cap);
    data[CAP_TO_INDEX(cap)].effective |= CAP_TO_MASK(cap);
  }
  if (::syscall(SYS_capset, &header, data) != 0) return SysFail(what);
  return SysOk();
}

}  // namespace

SysError DropAllCapabilities() { return SetOnlyCapabilities({}, "capset(empty)"); }

SysError KeepInitCapabilities() {
  return SetOnlyCapabilities({CAP_SETUID, CAP_SETGID, CAP_KILL}, "capset(setuid, setgid, kill)");
}

SysError SetNoNewPrivs() {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return SysFail("PR_SET_NO_NEW_PRIVS");
  return SysOk();
}

SysError SetNotDumpable() {
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return SysFail("PR_SET_DUMPABLE 0");
  return SysOk();
}

}  // namespace ci::runtime
