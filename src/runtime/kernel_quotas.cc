#include "runtime/kernel_quotas.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <string>

namespace ci {

// Sized for programs, far below the host defaults (signals ~ threads-max, inotify 128 per user).
const RlimitQuota kSandboxRlimits[4] = {{RLIMIT_NOFILE, 1024},
                                        {RLIMIT_SIGPENDING, 1024},
                                        {RLIMIT_MSGQUEUE, 819200},
                                        {RLIMIT_MEMLOCK, 8u << 20}};

const UserNamespaceQuota kSandboxUserNamespaceQuotas[12] = {
    {"max_inotify_instances", 32}, {"max_inotify_watches", 8192}, {"max_fanotify_groups", 0},
    {"max_fanotify_marks", 0},     {"max_user_namespaces", 0},    {"max_pid_namespaces", 0},
    {"max_net_namespaces", 0},     {"max_mnt_namespaces", 0},     {"max_ipc_namespaces", 0},
    {"max_uts_namespaces", 0},     {"max_cgroup_namespaces", 0},  {"max_time_namespaces", 0}};

SysError SetSandboxRlimits() {
  for (const RlimitQuota& q : kSandboxRlimits) {
    struct rlimit current {};
    if (::getrlimit(q.resource, &current) != 0) return SysFail("getrlimit");
    // Never raise what the daemon was given.
    rlim_t v = q.value < current.rlim_max ? q.value : current.rlim_max;
    struct rlimit limit = {v, v};
    if (::setrlimit(q.resource, &limit) != 0) {
      return SysFailErr(errno, "setrlimit " + std::to_string(q.resource));
    }
  }
  return SysOk();
}

SysError SetUserNamespaceQuotas() {
  // /proc/sys/user shows the limits of the reader's user namespace, whichever proc mount it is.
  for (const UserNamespaceQuota& q : kSandboxUserNamespaceQuotas) {
    const std::string path = std::string("/proc/sys/user/") + q.name;
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) continue;
    if (fd < 0) return SysFailErr(errno, "open " + path);
    const std::string value = std::to_string(q.value);
    ssize_t n = ::write(fd, value.data(), value.size());
    int err = errno;
    ::close(fd);
    if (n != static_cast<ssize_t>(value.size())) return SysFailErr(err, "write " + path);
  }
  return SysOk();
}

}  // namespace ci
