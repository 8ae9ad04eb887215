// The local backend's enforcement report against what is really in force: every measure that
// enforcement(spec) lists is checked by a probe inside a real sandbox of that spec, and the
// cgroup limits (invisible inside: own cgroup namespace, empty /sys) in the sandbox's cgroup seen
// from the host. A measure kind without a check here fails the test: no report line unproven.
#include <dirent.h>
#include <gmock/gmock.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "common/enforcement_spec.h"
#include "runtime/kernel/cgroups.h"
#include "sandbox_fixture.h"

namespace ci::testing_support {
namespace {

namespace fs = std::filesystem;

// "key=value" lines.
constexpr const char* kEnforcementProbe = R"SH(
for k in Seccomp NoNewPrivs CapEff CapPrm CapBnd CapAmb CapInh; do
  printf '%s=%s\n' "$k" "$(grep "^$k:" /proc/self/status | cut -f2)"
done
for n in user pid mnt net; do printf 'ns_%s=%s\n' "$n" "$(readlink /proc/self/ns/$n)"; done
printf 'uid_map=%s\n' "$(cat /proc/self/uid_map | tr -s ' ' | tr '\n' ';')"
printf 'ifaces=%s\n' "$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')"
touch /usr/x 2>/dev/null && echo usr=writable || echo usr=read-only
printf 'limit_cpu=%s\n' "$(grep '^Max cpu time' /proc/self/limits | tr -s ' ' | cut -d' ' -f4)"
printf 'limit_data=%s\n' "$(grep '^Max data size' /proc/self/limits | tr -s ' ' | cut -d' ' -f4)"
printf 'limit_nproc=%s\n' "$(grep '^Max processes' /proc/self/limits | tr -s ' ' | cut -d' ' -f3)"
printf 'limit_nofile=%s\n' "$(grep '^Max open files' /proc/self/limits | tr -s ' ' | cut -d' ' -f4)"
printf 'limit_sigpending=%s\n' "$(grep '^Max pending signals' /proc/self/limits | tr -s ' ' | cut -d' ' -f4)"
printf 'limit_msgqueue=%s\n' "$(grep '^Max msgqueue size' /proc/self/limits | tr -s ' ' | cut -d' ' -f4)"
printf 'limit_memlock=%s\n' "$(grep '^Max locked memory' /proc/self/limits | tr -s ' ' | cut -d' ' -f4)"
printf 'max_inotify=%s\n' "$(cat /proc/sys/user/max_inotify_instances)"
printf 'max_userns=%s\n' "$(cat /proc/sys/user/max_user_namespaces)"
[ -e /dev/tty ] && echo tty=present || echo tty=absent
printf 'tty_nr=%s\n' "$(cut -d' ' -f7 /proc/self/stat)"
kill -0 1 2>/dev/null && echo init=signalable || echo init=unreachable
)SH";

std::map<std::string, std::string> Lines(const std::string& out) {
  std::map<std::string, std::string> m;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (size_t eq = line.find('='); eq != std::string::npos)
      m[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return m;
}

std::string Read(const std::string& path) {
  std::string s = ReadFileOrEmpty(path);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Processes descending from this test process (the shim, the sandbox's init).
std::set<std::string> OurDescendants() {
  std::map<std::string, std::string> parent;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string pid = e.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream status(e.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("PPid:", 0) == 0) parent[pid] = line.substr(line.find_first_of("0123456789"));
    }
  }
  std::set<std::string> out;
  const std::string self = std::to_string(::getpid());
  for (const auto& [pid, ppid] : parent) {
    std::string p = ppid;
    for (int depth = 0; depth < 8 && !p.empty() && p != "0"; ++depth) {
      if (p == self) {
        out.insert(pid);
        break;
      }
      p = parent.count(p) ? parent[p] : "";
    }
  }
  return out;
}

// The sandbox's cgroup directory for `controller` ("memory", "pids", "cpu"; v2: all in one): the
// one under the detected layout whose cgroup.procs lists one of our descendants.
std::string SandboxCgroup(const runtime::CgroupLayout& layout, const std::string& controller) {
  const std::string parent = layout.version == 2
                                 ? layout.root
                                 : layout.root + "/" + controller + "/" + runtime::kCgroupParent;
  const std::set<std::string> ours = OurDescendants();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    if (!e.is_directory()) continue;
    std::ifstream procs(e.path() / "cgroup.procs");
    for (std::string pid; procs >> pid;) {
      if (ours.count(pid)) return e.path();
    }
  }
  return "";
}

std::string HostNamespace(const std::string& name) {
  return fs::read_symlink("/proc/self/ns/" + name).string();
}

class EnforcementTest : public SandboxTest {};

TEST_F(EnforcementTest, EveryReportedMeasureHoldsInsideTheSandbox) {
  SandboxSpec spec = testing_support::WithDistinctLimits(DefaultSpec());
  const Enforcement report = executor_->enforcement(spec);
  SCOPED_TRACE("reported: " + testing_support::ReportedNames(report));

  // Only a spec the host can serve (a CPU cap without a cpu controller refuses to start).
  bool cap_refused = false;
  for (const Downgrade& d : report.downgrades) cap_refused |= d.measure == "CPU cap 50% (cgroup)";
  if (cap_refused) spec.limits.cpu_percent = 0;
  const Enforcement served = cap_refused ? executor_->enforcement(spec) : report;

  auto prepared = Await(executor_->Prepare(spec));
  ASSERT_TRUE(prepared.ok()) << prepared.status().message();
  std::unique_ptr<Sandbox> sandbox = std::move(prepared.value());
  std::string out, err;
  auto outcome =
      Await(sandbox->Run(Shell(kEnforcementProbe), [&](StreamKind k, std::string_view chunk) {
        (k == StreamKind::kStdout ? out : err).append(chunk);
      }));
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  ASSERT_EQ(outcome->exit_code, 0) << err;
  auto in = Lines(out);
  SCOPED_TRACE("probe: " + out);
  // The sandbox still exists (its init is alive until Destroy): read its cgroup from the host.
  runtime::CgroupLayout layout;
  std::string why;
  const bool cgroups = runtime::DetectCgroups("", &layout, &why);
  auto cgroup_file = [&](const std::string& controller, const std::string& file) {
    std::string dir = cgroups ? SandboxCgroup(layout, controller) : "";
    EXPECT_FALSE(dir.empty()) << "no cgroup of this sandbox for " << controller;
    return dir.empty() ? std::string("(none)") : Read(dir + "/" + file);
  };

  std::set<MeasureKind> checked;
  for (const Measure& m : served.enforced) {
    SCOPED_TRACE(MeasureName(m));
    checked.insert(m.kind);
    switch (m.kind) {
      case MeasureKind::kUserNamespace:
        EXPECT_NE(in["ns_user"], HostNamespace("user"));
        EXPECT_NE(in["uid_map"], "0 0 4294967295;");
        break;
      case MeasureKind::kPidNamespace:
        EXPECT_NE(in["ns_pid"], HostNamespace("pid"));
        break;
      case MeasureKind::kMountNamespace:
        EXPECT_NE(in["ns_mnt"], HostNamespace("mnt"));
        break;
      case MeasureKind::kNetworkNamespace:
        EXPECT_NE(in["ns_net"], HostNamespace("net"));
        EXPECT_EQ(in["ifaces"], "lo ");
        break;
      case MeasureKind::kReadOnlyRoot:
        EXPECT_EQ(in["usr"], "read-only");
        break;
      case MeasureKind::kNoCapabilities:
        for (const char* set : {"CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"}) {
          EXPECT_EQ(in[set], "0000000000000000") << set;
        }
        break;
      case MeasureKind::kNoNewPrivs:
        EXPECT_EQ(in["NoNewPrivs"], "1");
        break;
      case MeasureKind::kSeccomp:
        EXPECT_EQ(in["Seccomp"], "2");
        EXPECT_EQ(m.detail, "default profile");
        break;
      case MeasureKind::kCpuTime:
        EXPECT_EQ(m.amount, 7u);
        EXPECT_EQ(in["limit_cpu"], "7");
        break;
      case MeasureKind::kMemoryLimit:
        EXPECT_EQ(m.amount, 200ull << 20);
        if (m.detail.rfind("cgroup", 0) == 0) {
          EXPECT_EQ(
              cgroup_file("memory", layout.version == 2 ? "memory.max" : "memory.limit_in_bytes"),
              std::to_string(200ull << 20));
        } else {
          EXPECT_EQ(in["limit_data"], std::to_string(200ull << 20));
        }
        break;
      case MeasureKind::kPidsLimit:
        EXPECT_EQ(m.amount, 48u);
        if (m.detail.rfind("cgroup", 0) == 0) {
          EXPECT_EQ(cgroup_file("pids", "pids.max"), "48");
        } else {
          EXPECT_EQ(in["limit_nproc"], "48");
        }
        break;
      case MeasureKind::kCpuCap:
        EXPECT_EQ(m.amount, 50u);
        if (layout.version == 2) {
          EXPECT_EQ(cgroup_file("cpu", "cpu.max"), "50000 100000");
        } else {
          // Where cpu and cpuacct share a hierarchy, the sandbox's directory is the cpuacct one.
          std::string dir = SandboxCgroup(layout, "cpu");
          if (dir.empty()) dir = SandboxCgroup(layout, "cpuacct");
          ASSERT_FALSE(dir.empty());
          EXPECT_EQ(Read(dir + "/cpu.cfs_quota_us"), "50000");
          EXPECT_EQ(Read(dir + "/cpu.cfs_period_us"), "100000");
        }
        break;
      case MeasureKind::kOpenFilesLimit:
        EXPECT_EQ(std::to_string(m.amount), in["limit_nofile"]);
        break;
      case MeasureKind::kQueuedSignalsLimit:
        EXPECT_EQ(std::to_string(m.amount), in["limit_sigpending"]);
        break;
      case MeasureKind::kMessageQueueLimit:
        EXPECT_EQ(std::to_string(m.amount), in["limit_msgqueue"]);
        break;
      case MeasureKind::kLockedMemoryLimit:
        EXPECT_EQ(std::to_string(m.amount), in["limit_memlock"]);
        break;
      case MeasureKind::kUserNamespaceQuotas:
        EXPECT_EQ(in["max_inotify"], "32");
        EXPECT_EQ(in["max_userns"], "0");
        break;
      case MeasureKind::kNoTerminal:
        EXPECT_EQ(in["tty"], "absent");
        EXPECT_EQ(in["tty_nr"], "0");  // no controlling terminal
        break;
      case MeasureKind::kOwnHostIds: {
        // "65532 <host id> 1" within the reported FIRST-LAST, and not the daemon's own uid.
        std::smatch range, map;
        ASSERT_TRUE(std::regex_search(m.detail, range, std::regex("(\\d+)-(\\d+)")));
        ASSERT_TRUE(std::regex_search(in["uid_map"], map, std::regex("65532 (\\d+) 1")));
        const uint64_t id = std::stoull(map[1]);
        EXPECT_GE(id, std::stoull(range[1]));
        EXPECT_LE(id, std::stoull(range[2]));
        EXPECT_NE(id, ::geteuid());
        break;
      }
      case MeasureKind::kInitUnreachable:
        EXPECT_EQ(in["init"], "unreachable");
        break;
      default:
        ADD_FAILURE() << "no check for this measure kind: add one here";
    }
  }
  // What every local sandbox gets, whatever the host: the report may not leave it out either.
  for (MeasureKind k :
       {MeasureKind::kUserNamespace, MeasureKind::kPidNamespace, MeasureKind::kMountNamespace,
        MeasureKind::kNetworkNamespace, MeasureKind::kReadOnlyRoot, MeasureKind::kNoCapabilities,
        MeasureKind::kNoNewPrivs, MeasureKind::kSeccomp, MeasureKind::kMemoryLimit,
        MeasureKind::kPidsLimit, MeasureKind::kCpuTime, MeasureKind::kOpenFilesLimit,
        MeasureKind::kQueuedSignalsLimit, MeasureKind::kMessageQueueLimit,
        MeasureKind::kLockedMemoryLimit, MeasureKind::kUserNamespaceQuotas,
        MeasureKind::kNoTerminal}) {
    EXPECT_TRUE(checked.count(k)) << "not reported: " << MeasureName(Measure(k));
  }
  EXPECT_EQ(checked.count(MeasureKind::kCpuCap), cap_refused ? 0u : 1u);
  Await(sandbox->Destroy());
}

}  // namespace
}  // namespace ci::testing_support
