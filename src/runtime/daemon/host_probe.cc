#include "runtime/daemon/host_probe.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/kernel/cgroups.h"
#include "runtime/kernel/unique_fd.h"

namespace ci::runtime {
namespace {

HostFinding Finding(std::string what, bool ok, bool required, std::string detail, std::string fix) {
  return {std::move(what), ok, required, std::move(detail), ok ? "" : std::move(fix)};
}

// Runs unshare(flags) in a forked child, optionally after dropping to `uid`; 0 or the errno.
// A child, because unshare changes the caller for good, and CLONE_NEWUSER refuses a threaded
// caller.
int TryUnshare(int flags, int uid) {
  pid_t pid = ::fork();
  if (pid < 0) return errno;
  if (pid == 0) {
    if (uid >= 0 && (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 ||
                     ::setresuid(uid, uid, uid) != 0)) {
      ::_exit(120);
    }
    ::_exit(::unshare(flags) == 0 ? 0 : (errno & 0x7f));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status)) return EINTR;
  return WEXITSTATUS(status) == 120 ? EPERM : WEXITSTATUS(status);
}

bool Writable(const std::string& path) { return ::access(path.c_str(), W_OK) == 0; }

std::string Words(const std::vector<std::string>& w) {
  std::string s;
  for (const auto& x : w) s += (s.empty() ? "" : " ") + x;
  return s.empty() ? "(none)" : s;
}

}  // namespace

std::vector<HostFinding> ProbeNamespaces() {
  std::vector<HostFinding> out;
  const bool root = ::geteuid() == 0;
  struct Kind {
    const char* name;
    int flag;
  };
  // As root the sandbox's namespaces are created directly; rootless, inside a user namespace.
  for (Kind k : {Kind{"user", CLONE_NEWUSER}, Kind{"pid", CLONE_NEWPID}, Kind{"mount", CLONE_NEWNS},
                 Kind{"net", CLONE_NEWNET}, Kind{"ipc", CLONE_NEWIPC}, Kind{"uts", CLONE_NEWUTS},
                 Kind{"cgroup", CLONE_NEWCGROUP}}) {
    int flags = k.flag | (root || k.flag == CLONE_NEWUSER ? 0 : CLONE_NEWUSER);
    int err = TryUnshare(flags, -1);
    out.push_back(Finding(std::string(k.name) + " namespace", err == 0, true,
                          err == 0 ? "unshare succeeded" : std::string("unshare: ") + strerror(err),
                          "use a kernel with " + std::string(k.name) +
                              " namespaces enabled; in a container, run it with "
                              "--privileged or a seccomp/AppArmor profile that allows unshare"));
  }
  if (root) {
    // Only rootless mode needs this; as root it is informational.
    int err = TryUnshare(CLONE_NEWUSER, 65534);
    out.push_back(Finding("user namespace as an unprivileged user (uid 65534)", err == 0, false,
                          err == 0 ? "unshare succeeded" : std::string("unshare: ") + strerror(err),
                          "needed only for rootless mode: see the user namespace settings above"));
  }
  return out;
}

std::vector<HostFinding> ProbeCgroups(const std::string& configured_root) {
  std::vector<HostFinding> out;
  CgroupLayout layout;
  std::string why;
  const bool usable = DetectCgroups(configured_root, &layout, &why);
  // Appended, not `"v" + std::to_string(...)`: GCC 12 -O3 reports a false -Werror=restrict on
  // `const char* + std::string&&` (GCC bug 105651).
  std::string found = "v";
  found.append(std::to_string(layout.version)).append(" at ").append(layout.root);
  found.append(configured_root.empty() ? " (detected)" : " (CGROUP_ROOT)");
  out.push_back(Finding("cgroup controllers for sandboxes (memory, pids)", usable, true,
                        usable ? found : why,
                        "see the detail; without cgroups memory and process limits are weaker"));
  CgroupV2Probe p = ProbeCgroupV2({});
  if (p.error.empty()) {
    bool delegated = p.Has("memory") && p.Has("pids");
    out.push_back(Finding("cgroup v2: own cgroup", true, false,
                          p.own + " (controllers: " + Words(p.available) +
                              "; subtree_control: " + Words(p.enabled) + ")",
                          ""));
    if (layout.version == 2 || (!usable && delegated)) {
      const std::string dir = p.own;
      out.push_back(Finding("cgroup v2: own cgroup writable",
                            Writable(dir + "/cgroup.procs") && Writable(dir), layout.version == 2,
                            dir,
                            "run the daemon as a systemd service with Delegate=yes, or chown the "
                            "delegated cgroup to the daemon's user"));
    } else if (layout.version == 1) {
      out.push_back(Finding("cgroup v2", true, false,
                            "the cgroup2 mount at " + p.mount + " offers " + Words(p.available) +
                                ": memory and pids are bound to v1, so v1 is used",
                            ""));
    }
  } else {
    out.push_back(Finding("cgroup v2", true, false, p.error + " (v1-only host)", ""));
  }
  if (layout.version == 1 || !usable) {
    const std::string root = layout.version == 1 ? layout.root : "/sys/fs/cgroup";
    for (const char* c : {"memory", "pids", "cpuacct"}) {
      const std::string dir = root + "/" + c;
      const bool mounted = cgfs::Exists(dir + "/cgroup.procs");
      const bool required = std::string(c) != "cpuacct" && layout.version == 1;
      out.push_back(Finding(
          std::string("cgroup v1: ") + c, mounted && Writable(dir), required,
          !mounted ? dir + " is not a mounted hierarchy"
                   : dir + (Writable(dir) ? " mounted, writable" : " mounted, not writable"),
          std::string(c) == "cpuacct" ? "mount the cpuacct controller for per-sandbox CPU usage"
                                      : "run the daemon as root (cgroup v1 is root-only)"));
    }
  }
  return out;
}

std::vector<HostFinding> ProbeSeccomp() {
  std::vector<HostFinding> out;
  int mode = ::prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
  out.push_back(Finding("seccomp available (prctl PR_GET_SECCOMP)", mode >= 0, true,
                        mode >= 0 ? "mode " + std::to_string(mode) +
                                        (mode == 2 ? " (the doctor itself runs filtered; "
                                                     "nesting filters works)"
                                                   : "")
                                  : std::string("prctl: ") + strerror(errno),
                        "use a kernel built with CONFIG_SECCOMP_FILTER"));
  std::string actions;
  bool read = cgfs::ReadFile("/proc/sys/kernel/seccomp/actions_avail", &actions);
  while (!actions.empty() && actions.back() == '\n') actions.pop_back();
  const bool has = read && actions.find("errno") != std::string::npos &&
                   actions.find("kill_process") != std::string::npos;
  out.push_back(Finding(
      "seccomp filter actions (errno, kill_process)", has, true,
      read ? "actions_avail: " + actions : "cannot read /proc/sys/kernel/seccomp/actions_avail",
      "use a kernel with seccomp filters (Linux 4.14 or later)"));
  const scmp_version* v = seccomp_version();
  const bool new_enough = v != nullptr && (v->major > 2 || (v->major == 2 && v->minor >= 5));
  out.push_back(Finding("libseccomp", new_enough, false,
                        v ? "version " + std::to_string(v->major) + "." + std::to_string(v->minor) +
                                "." + std::to_string(v->micro)
                          : "unknown version",
                        "libseccomp 2.5 or later knows the newer syscall names (Debian 12 has "
                        "2.5.4)"));
  return out;
}

std::vector<HostFinding> ProbeRootfs(const std::string& rootfs) {
  std::vector<HostFinding> out;
  const bool host = rootfs.empty() || rootfs == "host";
  const std::string base = host ? "" : rootfs;
  const std::string fix = host ? "install the host's python3 (apt-get install python3)"
                               : "unpack an image root with /usr and python3 into " + rootfs;
  out.push_back(
      Finding("SANDBOX_ROOTFS", host || cgfs::Exists(rootfs), true,
              host ? "host (read-only binds of this machine's /usr, /lib*, /bin, /sbin)" : rootfs,
              "set SANDBOX_ROOTFS to host or an existing directory"));
  std::string missing;
  for (const char* d : {"/usr", "/bin", "/lib"}) {
    if (!cgfs::Exists(base + d)) missing += (missing.empty() ? "" : ", ") + base + d;
  }
  out.push_back(Finding("rootfs directories (/usr, /bin, /lib)", missing.empty(), true,
                        missing.empty() ? "present" : "missing: " + missing, fix));
  const std::string python = base + "/usr/bin/python3";
  out.push_back(
      Finding("python3 in the rootfs", ::access(python.c_str(), X_OK) == 0, true, python, fix));
  return out;
}

std::vector<HostFinding> ProbeDocker() {
  const char* env = std::getenv("DOCKER_HOST");
  std::string host = env != nullptr && *env != '\0' ? env : "unix:///var/run/docker.sock";
  if (host.rfind("unix://", 0) != 0) {
    return {
        Finding("Docker Engine", true, false, "DOCKER_HOST=" + host + " (not probed: tcp)", "")};
  }
  const std::string path = host.substr(7);
  const std::string fix = "for EXECUTOR_BACKEND=docker: start dockerd or set DOCKER_HOST";
  if (!cgfs::Exists(path)) return {Finding("Docker Engine", false, false, path + " missing", fix)};
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (!fd.valid() || path.size() >= sizeof addr.sun_path) {
    return {Finding("Docker Engine", false, false, "cannot use socket " + path, fix)};
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  timeval tv{2, 0};  // a wedged dockerd must not hang the doctor
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return {Finding("Docker Engine", false, false, "connect " + path + ": " + std::strerror(errno),
                    fix)};
  }
  const std::string req = "GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n";
  std::string resp;
  if (::write(fd.get(), req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
    char buf[1024];
    ssize_t n;
    while ((n = ::read(fd.get(), buf, sizeof buf)) > 0 && resp.size() < 8192) {
      resp.append(buf, static_cast<size_t>(n));
    }
  }
  const bool ok = resp.rfind("HTTP/1.", 0) == 0 && resp.find(" 200 ") != std::string::npos;
  std::string status = resp.substr(0, resp.find('\r'));
  return {Finding("Docker Engine", ok, false,
                  path + (ok ? " answers GET /_ping: " : " GET /_ping: ") +
                      (status.empty() ? "no answer" : status),
                  fix)};
}

std::vector<HostFinding> ProbeKubernetes() {
  const char* svc = std::getenv("KUBERNETES_SERVICE_HOST");
  const std::string token = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  if (svc != nullptr && *svc != '\0') {
    bool has = cgfs::Exists(token);
    return {Finding("Kubernetes credentials", has, false,
                    std::string("in-cluster: KUBERNETES_SERVICE_HOST=") + svc + ", token " +
                        (has ? "present" : "missing"),
                    "mount the service account token (automountServiceAccountToken: true)")};
  }
  const char* kc = std::getenv("KUBECONFIG");
  const char* home = std::getenv("HOME");
  std::string path = kc != nullptr && *kc != '\0'
                         ? std::string(kc)
                         : std::string(home != nullptr ? home : "") + "/.kube/config";
  // KUBECONFIG may list several files; the first is enough to say credentials exist.
  path = path.substr(0, path.find(':'));
  bool has = cgfs::Exists(path);
  return {Finding("Kubernetes credentials", has, false,
                  has ? "kubeconfig " + path : "not in a cluster; no kubeconfig at " + path,
                  "for EXECUTOR_BACKEND=kubernetes: run in a cluster or set KUBECONFIG")};
}

}  // namespace ci::runtime
