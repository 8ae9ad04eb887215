#include "runtime/seccomp.h"

namespace ci {

SysError LoadSeccomp(const Plan& plan) {
  if (plan.seccomp_profile_json.empty()) return SysOk();
  return SysFailErr(ENOSYS, "seccomp profiles are not supported by the local runtime yet");
}

}  // namespace ci
