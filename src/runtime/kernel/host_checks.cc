#include "runtime/kernel/host_checks.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "runtime/kernel/unique_fd.h"

namespace ci::runtime {
namespace {

// The first line of a /proc/sys file as an integer; false when absent (the knob does not exist
// on this kernel) or unreadable.
bool ReadSysctl(const std::string& path, long* value) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  char buf[64] = {};
  ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return false;
  char* end = nullptr;
  *value = std::strtol(buf, &end, 10);
  return end != buf;
}

constexpr const char* kAppArmorKnob = "kernel.apparmor_restrict_unprivileged_userns";
constexpr const char* kAppArmorFix =
    "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+): give the code-interpreter "
    "binary a profile that allows them, e.g. /etc/apparmor.d/code-interpreter containing "
    "'abi <abi/4.0>, include <tunables/global> profile code-interpreter /path/to/code-interpreter "
    "flags=(unconfined) { userns, }' then 'apparmor_parser -r /etc/apparmor.d/code-interpreter'; "
    "or allow them host-wide with 'sysctl kernel.apparmor_restrict_unprivileged_userns=0'; or "
    "run the daemon as root";

}  // namespace

bool RunsRootless() { return ::geteuid() != 0; }

std::vector<HostFinding> CheckUserNamespaceHost(const HostCheckInputs& in) {
  std::vector<HostFinding> out;
  long v = 0;
  {
    HostFinding f{"user namespaces enabled (user.max_user_namespaces)", true, true, "", ""};
    if (!ReadSysctl(in.proc_sys + "/user/max_user_namespaces", &v)) {
      f.ok = false;
      f.detail = "cannot read " + in.proc_sys + "/user/max_user_namespaces";
      f.fix = "use a kernel built with CONFIG_USER_NS";
    } else {
      f.detail = "user.max_user_namespaces = " + std::to_string(v);
      if (v <= 0) {
        f.ok = false;
        f.fix = "sysctl user.max_user_namespaces=15000 (and set it in /etc/sysctl.d/ to persist)";
      }
    }
    out.push_back(f);
  }
  // Debian/Ubuntu's out-of-tree knob (gone since Debian 11's kernels default it to 1, but older
  // or hardened hosts still set 0). It only restricts unprivileged callers; root is exempt.
  if (ReadSysctl(in.proc_sys + "/kernel/unprivileged_userns_clone", &v)) {
    HostFinding f{"unprivileged user namespaces (kernel.unprivileged_userns_clone)", true, true,
                  "kernel.unprivileged_userns_clone = " + std::to_string(v), ""};
    if (v == 0 && in.rootless) {
      f.ok = false;
      f.fix =
          "sysctl kernel.unprivileged_userns_clone=1 (and in /etc/sysctl.d/ to persist), or "
          "run the daemon as root";
    }
    out.push_back(f);
  }
  // AppArmor 4 (Ubuntu 23.10+, 24.04): an unconfined, unprivileged process either cannot create
  // a user namespace or gets one without capabilities, so every mount in it fails. Root is exempt.
  if (ReadSysctl(in.proc_sys + "/kernel/apparmor_restrict_unprivileged_userns", &v)) {
    HostFinding f{"unprivileged user namespaces (AppArmor)", true, true,
                  std::string(kAppArmorKnob) + " = " + std::to_string(v), ""};
    if (v == 1 && in.rootless) {
      f.ok = false;
      f.fix = kAppArmorFix;
    }
    out.push_back(f);
  }
  for (const char* ns : {"user", "pid", "mnt", "net", "ipc", "uts", "cgroup"}) {
    const std::string path = in.proc_self_ns + "/" + ns;
    HostFinding f{std::string(ns) + " namespaces", true, true, path, ""};
    if (::access(path.c_str(), F_OK) != 0) {
      f.ok = false;
      f.detail = path + " is missing";
      f.fix = std::string("use a kernel built with ") + ns + " namespaces";
    }
    out.push_back(f);
  }
  if (in.rootless) {
    // An unprivileged writer must deny setgroups(2) before it may write a gid_map, so the
    // sandbox can never drop the daemon user's supplementary groups: they stay in force for
    // permission checks on the (read-only) host files bound into the sandbox.
    int groups = in.supplementary_groups >= 0 ? in.supplementary_groups : ::getgroups(0, nullptr);
    HostFinding f{"rootless: the daemon's user has no supplementary groups", groups == 0, false,
                  std::to_string(groups) + " supplementary group(s)", ""};
    if (groups != 0) {
      f.fix =
          "run the daemon as a dedicated user without supplementary groups (sandboxes keep "
          "them: setgroups is denied in a user namespace an unprivileged user maps)";
    }
    out.push_back(f);
  }
  return out;
}

std::string FirstBlocker(const std::vector<HostFinding>& findings) {
  for (const HostFinding& f : findings) {
    if (!f.ok && f.required) return f.what + ": " + f.detail + ". Fix: " + f.fix;
  }
  return "";
}

std::string ExplainUserNamespaceFailure(int err, const HostCheckInputs& in) {
  if (err != EPERM && err != EACCES && err != ENOSPC && err != EUSERS) return "";
  for (const HostFinding& f : CheckUserNamespaceHost(in)) {
    if (!f.ok && f.required && f.what.find("namespaces") != std::string::npos) {
      return f.what + " blocks the sandbox (" + f.detail + "). Fix: " + f.fix;
    }
  }
  return "";
}

}  // namespace ci::runtime
