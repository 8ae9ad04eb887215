// Active host probes for `code-interpreter doctor`: they try things (unshare in a child, connect
// to the Docker socket) rather than only reading settings. The settings themselves are
// host_checks.h's; both report HostFinding.
#pragma once

#include <string>
#include <vector>

#include "runtime/kernel/host_checks.h"

namespace ci::runtime {

// unshare() of each namespace kind in a forked child (as root: the kinds a sandbox uses), and a
// user namespace created by an unprivileged user (uid 65534), which rootless mode needs.
std::vector<HostFinding> ProbeNamespaces();

// The cgroup version the daemon would use and what it may do there: v2 own cgroup, delegated
// controllers, writability; v1 memory/pids/cpuacct mounts and writability. Read-only.
std::vector<HostFinding> ProbeCgroups(const std::string& configured_root);

// prctl(PR_GET_SECCOMP), /proc/sys/kernel/seccomp/actions_avail, libseccomp's version.
std::vector<HostFinding> ProbeSeccomp();

// SANDBOX_ROOTFS: "host" needs /usr, /lib, /bin, /sbin and python3; a directory needs the same
// inside it.
std::vector<HostFinding> ProbeRootfs(const std::string& rootfs);

// For the later backends (never required): DOCKER_HOST or /var/run/docker.sock answering
// GET /_ping; Kubernetes in-cluster credentials or a kubeconfig.
std::vector<HostFinding> ProbeDocker();
std::vector<HostFinding> ProbeKubernetes();

}  // namespace ci::runtime
