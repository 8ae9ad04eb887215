// The local Executor: detects cgroups once, then spawns one shim per sandbox.
#include "runtime/local_executor.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <mutex>

#include "runtime/cgroups.h"
#include "runtime/host_checks.h"
#include "runtime/local_sandbox.h"
#include "runtime/plan.h"
#include "runtime/rootless.h"
#include "runtime/seccomp_profile.h"
#include "runtime/shim_spawn.h"

namespace ci {
namespace {

using namespace std::chrono_literals;

constexpr auto kPrepareTimeout = 10s;

class LocalExecutor final : public Executor {
 public:
  LocalExecutor(asio::any_io_executor ex, LocalExecutorOptions opts)
      : ex_(std::move(ex)), opts_(std::move(opts)) {
    // The one place the daemon sets up cgroups (v2: may move itself into a leaf cgroup); once
    // per process for the detected root.
    CgroupSetup setup = SetUpCgroupsOnce(opts_.cgroup_root);
    detected_ = setup.ok;
    layout_ = setup.layout;
    detect_error_ = setup.error;
    for (const auto& note : setup.notes) spdlog::info("cgroups: {}", note);
    if (setup.ok) spdlog::debug("cgroups: v{} at {}", layout_.version, layout_.root);
    DecideRootless();
  }

  std::string_view name() const override { return "local"; }
  bool supports_sessions() const override { return true; }

  asio::awaitable<Result<std::unique_ptr<Sandbox>>> Prepare(const SandboxSpec& spec) override {
    if (Status s = Validate(spec); !s.ok()) co_return s.Context("invalid sandbox spec");
    CgroupLayout layout = layout_;
    if (!spec.cgroup_root.empty() && spec.cgroup_root != opts_.cgroup_root) {
      CgroupSetup setup = SetUpCgroups(spec.cgroup_root, {});
      if (!setup.ok) co_return Status::Error(setup.error);
      layout = setup.layout;
    } else if (!detected_ && !no_cgroup_) {
      co_return Status::Error(detect_error_);
    }
    Result<ShimHandles> shim = SpawnShim(opts_.shim_binary);
    if (!shim.ok()) co_return shim.status().Context("preparing a local sandbox");
    auto sandbox = std::make_unique<LocalSandbox>(ex_, std::move(shim.value()), spec);
    Result<std::string> bpf = CompiledSeccomp(spec.security);
    if (!bpf.ok()) co_return bpf.status().Context("the sandbox's seccomp profile");
    Plan plan = PlanFromSpec(spec, layout, std::move(bpf).value());
    plan.rootless = rootless_;
    Status started = co_await sandbox->Start(plan, kPrepareTimeout);
    if (!started.ok() && !userns_blocker_.empty()) {
      // AppArmor may let the clone succeed and then refuse every mount inside: name the cause.
      started = Status::Error(started.message() + "; likely cause: " + userns_blocker_);
    }
    if (!started.ok()) {
      sandbox->Kill();
      co_await sandbox->Destroy();  // reaps the shim, removes the cgroup
      co_return started;
    }
    co_return std::unique_ptr<Sandbox>(std::move(sandbox));
  }

  asio::awaitable<Status> Check() override { co_return CheckLocalRuntime(opts_); }

  std::string network_isolation() const override {
    return "none: own network namespace, loopback only";
  }

  // From the Plan that Prepare would send the shim for this spec, and the host facts decided at
  // construction: each measure is what init or the shim applies for a plan field or
  // unconditionally (sandbox_init.cc, shim.cc).
  Enforcement enforcement(const SandboxSpec& spec) const override {
    Result<std::string> bpf = CompiledSeccomp(spec.security);
    Plan plan = PlanFromSpec(spec, layout_, bpf.ok() ? bpf.value() : std::string());
    plan.rootless = rootless_;
    using K = MeasureKind;
    Enforcement e;
    e.enforced = {{K::kUserNamespace, 0, plan.rootless ? "one id: the daemon's user" : ""},
                  {K::kPidNamespace},
                  {K::kMountNamespace},
                  {K::kNetworkNamespace, 0, "loopback only"},
                  {K::kNoCapabilities},
                  {K::kCpuTime, spec.limits.cpu_time_sec, "RLIMIT_CPU"}};
    if (plan.read_only_root) e.enforced.push_back({K::kReadOnlyRoot});
    if (plan.no_new_privs) e.enforced.push_back({K::kNoNewPrivs});
    const Measure seccomp = SeccompMeasure(spec.security.seccomp_profile_name);
    if (!bpf.ok()) {
      e.downgrades.push_back({MeasureName(seccomp), bpf.status().message(), "fix the profile"});
    } else if (!plan.seccomp_bpf.empty() && spec.security.seccomp_log_denied) {
      e.downgrades.push_back(SeccompLogOnly(seccomp));
    } else if (!plan.seccomp_bpf.empty()) {
      e.enforced.push_back(seccomp);
    }
    AddLimits(plan, e);
    if (rootless_) {
      HostCheckInputs in;
      in.rootless = true;
      for (const HostFinding& f : CheckUserNamespaceHost(in)) {
        if (!f.ok && !f.required) e.downgrades.push_back({f.what, f.detail, f.fix});
      }
    }
    return e;
  }

 private:
  // Memory, pids and CPU cap: the plan's cgroup (version 0: none, init's rlimits instead).
  void AddLimits(const Plan& plan, Enforcement& e) const {
    using K = MeasureKind;
    const Measure cap{K::kCpuCap, plan.cpu_percent, "cgroup"};
    if (plan.cgroup.version > 0) {
      const std::string how = "cgroup v" + std::to_string(plan.cgroup.version);
      e.enforced.push_back({K::kMemoryLimit, plan.memory_bytes, how});
      e.enforced.push_back({K::kPidsLimit, plan.pids, how});
      if (plan.cpu_percent == 0) return;
      if (std::string why = CpuCapUnavailable(plan.cgroup); why.empty()) {
        e.enforced.push_back({K::kCpuCap, plan.cpu_percent, how});
      } else {
        e.downgrades.push_back({MeasureName(cap), why + ": every sandbox start is refused",
                                "enable the cpu controller for the sandboxes' cgroups, or unset "
                                "CPU_QUOTA_PERCENT"});
      }
      return;
    }
    const std::string fix =
        "run as root, or run under systemd with Delegate=yes on a cgroup v2 host";
    if (no_cgroup_) {
      e.enforced.push_back({K::kMemoryLimit, plan.memory_bytes, "RLIMIT_DATA, per process"});
      e.enforced.push_back({K::kPidsLimit, plan.pids, "RLIMIT_NPROC, per sandbox"});
      e.downgrades.push_back({"memory limit (cgroup)",
                              no_cgroup_reason_ + "; RLIMIT_DATA per process instead: an "
                                                  "allocation over it fails (MemoryError), "
                                                  "no memory_limit verdict",
                              fix});
      e.downgrades.push_back({"pids limit (cgroup)",
                              no_cgroup_reason_ + "; RLIMIT_NPROC instead: fork fails with "
                                                  "EAGAIN, no pids_limit verdict",
                              fix});
      if (plan.cpu_percent > 0) {
        e.downgrades.push_back(
            {MeasureName(cap), no_cgroup_reason_ + "; no CPU cap without one", fix});
      }
    } else {
      e.downgrades.push_back({"memory and pids limits (cgroup)", detect_error_,
                              "run as root on a host with cgroup memory and pids controllers"});
    }
  }

  // Compiling takes milliseconds and every sandbox of a daemon uses the same profile or two, so
  // each (profile text, log mode) is compiled once and the BPF bytes are reused.
  Result<std::string> CompiledSeccomp(const SandboxSecurity& security) const {
    if (security.seccomp_profile_json.empty()) return std::string();
    std::lock_guard lock(seccomp_mu_);
    auto key = std::make_pair(security.seccomp_log_denied, security.seccomp_profile_json);
    if (auto it = seccomp_cache_.find(key); it != seccomp_cache_.end()) return it->second;
    std::vector<std::string> skipped;
    Result<std::string> bpf =
        CompileSeccompProfile(security.seccomp_profile_json, security.seccomp_log_denied, &skipped);
    if (!bpf.ok()) return bpf;
    if (!skipped.empty()) {
      std::string names;
      for (const auto& n : skipped) names += (names.empty() ? "" : " ") + n;
      spdlog::debug("seccomp: syscall names unknown to this libseccomp were skipped: {}", names);
    }
    seccomp_cache_.emplace(std::move(key), bpf.value());
    return bpf;
  }

  // Rootless = the daemon's euid is not 0 (decided here, carried to the shim in the plan). Then
  // sandboxes run without a cgroup unless the detected one is writable by this user (a delegated
  // cgroup v2 subtree); root keeps failing loudly instead, a missing cgroup there is a bug.
  void DecideRootless() {
    rootless_ = RunsRootless();
    if (!rootless_) return;
    HostCheckInputs in;
    in.rootless = true;
    userns_blocker_ = FirstBlocker(CheckUserNamespaceHost(in));
    const std::string who = "uid " + std::to_string(::geteuid());
    if (!detected_) {
      no_cgroup_reason_ = "no cgroup the daemon's user (" + who + ") may write: " + detect_error_;
    } else if (!CgroupWritableByMe(layout_)) {
      no_cgroup_reason_ = "no cgroup the daemon's user (" + who + ") may write: " +
                          (layout_.version == 1 ? std::string("cgroup v1 needs root")
                                                : layout_.root + " is not writable");
    } else {
      return;
    }
    no_cgroup_ = true;
    layout_ = {};  // version 0: the shim creates none, init sets rlimits
  }

  asio::any_io_executor ex_;
  LocalExecutorOptions opts_;
  CgroupLayout layout_;
  bool detected_ = false;
  std::string detect_error_;
  bool rootless_ = false;
  bool no_cgroup_ = false;
  std::string no_cgroup_reason_;
  std::string userns_blocker_;     // rootless: the host setting that blocks user namespaces, or ""
  mutable std::mutex seccomp_mu_;  // enforcement() compiles too (const)
  mutable std::map<std::pair<bool, std::string>, std::string> seccomp_cache_;
};

}  // namespace

std::unique_ptr<Executor> MakeLocalExecutor(asio::any_io_executor ex, LocalExecutorOptions opts) {
  ::signal(SIGPIPE, SIG_IGN);
  return std::make_unique<LocalExecutor>(std::move(ex), std::move(opts));
}

Status CheckLocalRuntime(const LocalExecutorOptions& opts) {
  HostCheckInputs in;
  in.rootless = RunsRootless();
  if (std::string blocker = FirstBlocker(CheckUserNamespaceHost(in)); !blocker.empty()) {
    return Status::Error(blocker);
  }
  CgroupLayout layout;
  std::string why;
  // Rootless, a missing cgroup is a reported downgrade (enforcement()), not a failure.
  if (!DetectCgroups(opts.cgroup_root, &layout, &why) && !in.rootless) {
    return Status::Error(why);
  }
  if (::access(opts.shim_binary.c_str(), X_OK) != 0) {
    return Status::Errno("shim binary " + opts.shim_binary + " is not executable", errno);
  }
  return {};
}

}  // namespace ci
