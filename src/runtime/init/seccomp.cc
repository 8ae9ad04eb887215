#include "runtime/init/seccomp.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include <climits>

namespace ci::runtime {

SysError LoadSeccomp(const Plan& plan) {
  const std::string& bpf = plan.seccomp_bpf;
  if (bpf.empty()) return SysOk();
  if (bpf.size() % sizeof(sock_filter) != 0 || bpf.size() / sizeof(sock_filter) > USHRT_MAX) {
    return SysFailErr(EINVAL, "the seccomp program in the plan is malformed");
  }
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(bpf.size() / sizeof(sock_filter));
  // The string's buffer is suitably aligned for sock_filter (4 bytes); the kernel copies it.
  prog.filter = reinterpret_cast<sock_filter*>(const_cast<char*>(bpf.data()));
  // Init is single-threaded here, so TSYNC is not needed; the program inherits the filter over
  // fork and execve and can only add stricter ones.
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) {
    return SysFail("install the seccomp filter");
  }
  return SysOk();
}

}  // namespace ci::runtime
