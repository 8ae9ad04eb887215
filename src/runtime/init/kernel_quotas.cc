#include "runtime/init/kernel_quotas.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <string>

namespace ci::runtime {

// Sized for programs, far below the host's 128 inotify instances per user.
const UserNamespaceQuota kSandboxUserNamespaceQuotas[12] = {
    {"max_inotify_instances", 32}, {"max_inotify_watches", 8192}, {"max_fanotify_groups", 0},
    {"max_fanotify_marks", 0},     {"max_user_namespaces", 0},    {"max_pid_namespaces", 0},
    {"max_net_namespaces", 0},     {"max_mnt_namespaces", 0},     {"max_ipc_namespaces", 0},
    {"max_uts_namespaces", 0},     {"max_cgroup_namespaces", 0},  {"max_time_namespaces", 0}};

SysError SetSandboxRlimits(const Plan& plan) {
  const struct {
    int resource;
    const char* name;
    uint64_t value;
  } limits[] = {{RLIMIT_NOFILE, "RLIMIT_NOFILE", plan.open_files},
                {RLIMIT_SIGPENDING, "RLIMIT_SIGPENDING", plan.queued_signals},
                {RLIMIT_MSGQUEUE, "RLIMIT_MSGQUEUE", plan.message_queue_bytes},
                {RLIMIT_MEMLOCK, "RLIMIT_MEMLOCK", plan.locked_memory_bytes}};
  for (const auto& l : limits) {
    struct rlimit current {};
    if (::getrlimit(l.resource, &current) != 0) return SysFail("getrlimit");
    rlim_t v = l.value < current.rlim_max ? l.value : current.rlim_max;
    struct rlimit limit = {v, v};
    if (::setrlimit(l.resource, &limit) != 0)
      return SysFailErr(errno, std::string("setrlimit ") + l.name);
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

}  // namespace ci::runtime
