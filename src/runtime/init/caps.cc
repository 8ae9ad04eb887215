#include "runtime/init/caps.h"

#include <linux/securebits.h>
#include <sys/capability.h>
#include <sys/prctl.h>

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
SysError SetOnlyCapabilities(std::initializer_list<cap_value_t> keep, const char* what) {
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) {
    return SysFail("clear ambient capabilities");
  }
  cap_t caps = cap_init();
  if (caps == nullptr) return SysFail("cap_init");
  const int n = static_cast<int>(keep.size());
  int rc = 0;
  if (n > 0) rc = cap_set_flag(caps, CAP_PERMITTED, n, keep.begin(), CAP_SET);
  if (rc == 0 && n > 0) rc = cap_set_flag(caps, CAP_EFFECTIVE, n, keep.begin(), CAP_SET);
  if (rc == 0) rc = cap_set_proc(caps);
  int err = errno;
  cap_free(caps);
  if (rc != 0) return SysFailErr(err, what);
  return SysOk();
}

}  // namespace

SysError DropAllCapabilities() { return SetOnlyCapabilities({}, "cap_set_proc(empty)"); }

SysError KeepInitCapabilities() {
  return SetOnlyCapabilities({CAP_SETUID, CAP_SETGID, CAP_KILL},
                             "cap_set_proc(setuid, setgid, kill)");
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
