// cgroup v2: finding the daemon's own cgroup, delegating controllers below it (the daemon side,
// once), and one sandbox's directory <parent>/<name> (the shim side).
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/mountinfo.h"
#include "runtime/kernel/cgroups.h"

namespace ci::runtime {
namespace {

// Controllers a sandbox cannot do without, and the one that is only needed for cpu.max.
constexpr const char* kRequired[] = {"memory", "pids"};
constexpr const char* kOptional = "cpu";

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

std::string Join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out.empty() ? "(none)" : out;
}

std::string ParentDir(const std::string& dir) {
  size_t slash = dir.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : dir.substr(0, slash);
}

bool Contains(const std::vector<std::string>& words, std::string_view w) {
  for (const auto& x : words) {
    if (x == w) return true;
  }
  return false;
}

// Enables `wanted` (those not yet enabled) in dir's subtree_control with one write: the kernel
// applies a multi-controller write all or nothing.
SysError EnableControllers(const std::string& dir, const std::vector<std::string>& wanted) {
  const std::vector<std::string> enabled = cgfs::ReadWords(dir + "/cgroup.subtree_control");
  std::string value;
  for (const auto& c : wanted) {
    if (!Contains(enabled, c)) value += (value.empty() ? "+" : " +") + c;
  }
  if (value.empty()) return SysOk();
  return cgfs::WriteFile(dir + "/cgroup.subtree_control", value);
}

std::string SubtreeFix(const std::string& dir, const SysError& e) {
  std::string msg = "cannot enable controllers in " + dir + "/cgroup.subtree_control: " + e.what +
                    ": " + std::strerror(e.err);
  if (e.err == EBUSY) {
    msg +=
        " (the cgroup holds processes: cgroup v2 lets only a cgroup without processes "
        "delegate controllers; move them into a child cgroup, or point CGROUP_ROOT at an "
        "empty cgroup)";
  } else if (e.err == EACCES || e.err == EPERM || e.err == EROFS) {
    msg +=
        " (not writable by this user: run the daemon as a systemd service with Delegate=yes, "
        "or have an admin delegate the subtree, or point CGROUP_ROOT at a writable cgroup)";
  }
  return msg;
}

// The daemon's processes leave <own> for the leaf <own>/daemon, then <own> can delegate.
SysError MoveSelfToLeaf(const std::string& own, pid_t self, CgroupSetup* out) {
  const std::string leaf = own + "/" + kCgroupDaemonLeaf;
  CI_SYS_RETURN_IF_ERROR(cgfs::Mkdir(leaf, /*exist_ok=*/true));
  // Writing a pid to cgroup.procs moves the whole thread group, i.e. every thread in
  // /proc/self/task, in one step; writing each tid would be redundant. Other processes that
  // share the cgroup are not ours to move: the subtree_control write then fails with EBUSY and
  // the error names them.
  CI_SYS_RETURN_IF_ERROR(cgfs::WriteFile(leaf + "/cgroup.procs", std::to_string(self)));
  out->notes.push_back("moved the daemon (pid " + std::to_string(self) + ") from " + own +
                       " into the leaf " + leaf +
                       " (cgroup v2: a cgroup with processes cannot delegate controllers)");
  return SysOk();
}

// Enables the controllers sandboxes need in `dir` (kRequired at once, then kOptional when
// offered); fills out->controllers. `available` is dir's cgroup.controllers.
bool EnableForSandboxes(const std::string& dir, const std::vector<std::string>& available,
                        CgroupSetup* out) {
  std::vector<std::string> required(std::begin(kRequired), std::end(kRequired));
  if (SysError e = EnableControllers(dir, required); !e.ok()) {
    out->error = SubtreeFix(dir, e);
    return false;
  }
  out->controllers = required;
  if (Contains(available, kOptional)) {
    // Best effort: cpu is only needed for a cpu.max cap (cpu.stat usage works without it), and
    // enabling it fails while a real-time thread runs in the subtree.
    if (SysError e = EnableControllers(dir, {kOptional}); e.ok()) {
      out->controllers.push_back(kOptional);
    } else {
      out->notes.push_back(std::string("cpu controller not enabled (no cpu.max caps): ") +
                           SubtreeFix(dir, e));
    }
  }
  return true;
}

CgroupSetup SetUpConfiguredV2(const std::string& root) {
  CgroupSetup out;
  CgroupV2Probe p;
  p.own = root;
  p.available = cgfs::ReadWords(root + "/cgroup.controllers");
  for (const char* c : kRequired) {
    if (!p.Has(c)) {
      out.error = MissingV2ControllerMessage(p, c);
      return out;
    }
  }
  if (!EnableForSandboxes(root, p.available, &out)) return out;
  out.ok = true;
  out.layout = {2, root};
  return out;
}

CgroupSetup SetUpOwnV2(const CgroupV2Probe& p, pid_t self) {
  CgroupSetup out;
  const std::string parent = p.own + "/" + kCgroupParent;
  bool all_enabled = true;
  for (const char* c : kRequired) all_enabled = all_enabled && Contains(p.enabled, c);
  // With the controllers already delegated below <own> (a previous run, or an admin), <own> can
  // hold no processes of ours; otherwise it usually holds us.
  if (!all_enabled && !cgfs::ReadWords(p.own + "/cgroup.procs").empty()) {
    if (SysError e = MoveSelfToLeaf(p.own, self, &out); !e.ok()) {
      out.error = "cannot move the daemon into a leaf cgroup of " + p.own + ": " + e.what + ": " +
                  std::strerror(e.err);
      return out;
    }
  }
  if (!EnableForSandboxes(p.own, p.available, &out)) return out;
  if (SysError e = cgfs::Mkdir(parent, /*exist_ok=*/true); !e.ok()) {
    out.error =
        "cannot create the sandboxes' parent cgroup: " + e.what + ": " + std::strerror(e.err);
    return out;
  }
  // The parent offers what <own> enabled; enabling it again one level down is what lets each
  // sandbox's directory have memory.max, pids.max and cpu.max.
  const std::vector<std::string> delegated = out.controllers;
  if (!EnableForSandboxes(parent, delegated, &out)) return out;
  out.controllers = delegated;
  out.ok = true;
  out.layout = {2, parent};
  return out;
}

class CgroupV2 final : public Cgroup {
 public:
  CgroupV2(std::string parent, std::string name)
      : dir_(std::move(parent) + "/" + name), name_(std::move(name)) {}

  SysError Create(const CgroupLimits& limits) override {
    CI_SYS_RETURN_IF_ERROR(cgfs::Mkdir(dir_, /*exist_ok=*/false));
    created_ = true;
    CI_SYS_RETURN_IF_ERROR(
        cgfs::WriteFile(dir_ + "/memory.max", std::to_string(limits.memory_bytes)));
    // memory.swap.max only exists with swap accounting; without it there is no swap to limit.
    if (cgfs::Exists(dir_ + "/memory.swap.max")) {
      CI_SYS_RETURN_IF_ERROR(cgfs::WriteFile(dir_ + "/memory.swap.max", "0"));
    }
    CI_SYS_RETURN_IF_ERROR(cgfs::WriteFile(dir_ + "/pids.max", std::to_string(limits.pids)));
    if (limits.cpu_percent > 0) {
      // A cap that cannot be applied is refused rather than silently dropped.
      if (!cgfs::Exists(dir_ + "/cpu.max")) {
        return SysFailErr(ENOTSUP, "cpu.max missing in " + dir_ +
                                       ": the cpu controller is not delegated to the sandboxes");
      }
      // quota per 100 ms period: 100% = 100000 us, one full CPU.
      CI_SYS_RETURN_IF_ERROR(cgfs::WriteFile(
          dir_ + "/cpu.max", std::to_string(uint64_t{limits.cpu_percent} * 1000) + " 100000"));
    }
    // memory.oom.group stays 0 on purpose: it would kill the sandbox's init together with the
    // program, losing the exit status report and the workspace that Collect still needs. The
    // OOM killer takes the largest process (the program); init then kills the rest of the tree
    // as for any exit, and memory.events oom_kill gives the verdict either way.
    return SysOk();
  }

  SysError AddProcess(pid_t pid) override {
    return cgfs::WriteFile(dir_ + "/cgroup.procs", std::to_string(pid));
  }

  CgroupStats ReadStats() const override {
    CgroupStats s;
    uint64_t v = 0;
    if (cgfs::ReadKey(dir_ + "/memory.events", "oom_kill", &v)) s.oom_killed = v > 0;
    if (cgfs::ReadKey(dir_ + "/pids.events", "max", &v)) s.pids_limit_hit = v > 0;
    if (cgfs::ReadU64(dir_ + "/memory.peak", &v)) s.memory_peak_bytes = v;  // Linux 5.19+
    // usage_usec is core cgroup accounting: present even without the cpu controller.
    if (cgfs::ReadKey(dir_ + "/cpu.stat", "usage_usec", &v)) s.cpu_ms = v / 1000;
    return s;
  }

  SysError Remove() override {
    if (!created_) return SysOk();
    // cgroup.kill (Linux 5.14+) kills every task atomically, including ones forking right now;
    // KillAndRmdir's pid walk is the fallback for older kernels.
    if (cgfs::Exists(dir_ + "/cgroup.kill")) (void)cgfs::WriteFile(dir_ + "/cgroup.kill", "1");
    SysError e = cgfs::KillAndRmdir(dir_, dir_ + "/cgroup.procs");
    if (e.ok()) created_ = false;
    return e;
  }

  SysError ThawForKill() override {
    if (!created_ || !cgfs::Exists(dir_ + "/cgroup.freeze")) return SysOk();
    return KillAndThaw({2, dir_});
  }

  std::string description() const override { return "v2 " + dir_; }

 private:
  std::string dir_;
  std::string name_;
  bool created_ = false;
};

}  // namespace

bool CgroupV2Probe::Has(std::string_view controller) const {
  return Contains(available, controller);
}

bool ParseUnifiedCgroupPath(std::string_view proc_self_cgroup, std::string* path) {
  for (std::string_view line : Lines(proc_self_cgroup)) {
    if (line.substr(0, 3) == "0::" && line.size() > 3 && line[3] == '/') {
      *path = std::string(line.substr(3));
      return true;
    }
  }
  return false;
}

bool FindCgroup2Dir(std::string_view mountinfo, const std::string& path, std::string* mount,
                    std::string* dir) {
  return ResolveCgroupDir(ParseCgroupMounts(mountinfo), "cgroup2", "", path, mount, dir);
}

CgroupV2Probe ProbeCgroupV2(const CgroupProcInputs& in) {
  CgroupV2Probe p;
  std::string self_cgroup, mountinfo, path;
  if (!cgfs::ReadFile(in.self_cgroup, &self_cgroup) ||
      !ParseUnifiedCgroupPath(self_cgroup, &path)) {
    p.error = "no cgroup v2 entry (0::) in " + in.self_cgroup;
    return p;
  }
  if (!cgfs::ReadFile(in.mountinfo, &mountinfo) ||
      !FindCgroup2Dir(mountinfo, path, &p.mount, &p.own)) {
    p.error = "no cgroup2 mount containing " + path + " in " + in.mountinfo;
    return p;
  }
  p.available = cgfs::ReadWords(p.own + "/cgroup.controllers");
  p.enabled = cgfs::ReadWords(p.own + "/cgroup.subtree_control");
  return p;
}

std::string MissingV2ControllerMessage(const CgroupV2Probe& p, const std::string& controller) {
  return "cgroup v2: the " + controller + " controller is not available to " + p.own +
         " (its cgroup.controllers lists: " + Join(p.available) +
         "); fix: run the daemon as a systemd service with Delegate=yes (or under `systemd-run "
         "-p Delegate=yes`), or have an admin run `echo +" +
         controller + " > " + ParentDir(p.own) + "/cgroup.subtree_control`";
}

CgroupSetup SetUpCgroups(const std::string& configured_root, const CgroupProcInputs& in) {
  if (!configured_root.empty()) {
    if (cgfs::Exists(configured_root + "/cgroup.controllers")) {
      return SetUpConfiguredV2(configured_root);
    }
    CgroupSetup out;
    if (CgroupV1Usable(configured_root)) {
      out.ok = true;
      out.layout = {1, configured_root};
    } else {
      out.error = "CGROUP_ROOT " + configured_root +
                  " is neither a cgroup v2 directory (no cgroup.controllers) nor a v1 root with "
                  "memory and pids mounts";
    }
    return out;
  }
  CgroupV2Probe p = ProbeCgroupV2(in);
  if (p.error.empty() && p.Has("memory") && p.Has("pids")) {
    return SetUpOwnV2(p, in.self_pid != 0 ? in.self_pid : ::getpid());
  }
  // Hybrid hosts (like the test machines) bind memory and pids to v1; the empty cgroup2 mount
  // next to them is then ignored, and nothing on it is touched.
  CgroupSetup out;
  if (CgroupV1Usable(in.v1_root)) {
    out.ok = true;
    out.layout = {1, in.v1_root};
    return out;
  }
  if (!p.error.empty()) {
    out.error = "no usable cgroups: " + p.error + "; and " + CgroupV1Missing(in.v1_root);
  } else {
    out.error = MissingV2ControllerMessage(p, p.Has("memory") ? "pids" : "memory");
  }
  return out;
}

std::unique_ptr<Cgroup> MakeCgroupV2(std::string parent, std::string name) {
  return std::make_unique<CgroupV2>(std::move(parent), std::move(name));
}

}  // namespace ci::runtime
