// The local Executor: detects cgroups once, then starts each sandbox under its own spawned shim
// or, for the host's root, under the fork server's zygote.
#include "runtime/daemon/local_executor.h"

#include <pwd.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>

#include "core/sleep.h"
#include "runtime/daemon/cgroup_reaper.h"
#include "runtime/daemon/fork_server_client.h"
#include "runtime/daemon/local_sandbox.h"
#include "runtime/daemon/seccomp_profile.h"
#include "runtime/daemon/shim_spawn.h"
#include "runtime/init/rootless.h"
#include "runtime/kernel/cgroups.h"
#include "runtime/kernel/host_checks.h"
#include "runtime/wire/plan.h"

namespace ci::runtime {
namespace {

using namespace std::chrono_literals;

constexpr auto kPrepareTimeout = 10s;
// Recycled sandboxes waiting at most, and for how long (each holds an init and a cgroup).
constexpr size_t kRecycleBinCapacity = 16;
constexpr auto kRecycledMaxIdle = std::chrono::seconds(300);

// A fork server and its restarts. A null server: its sandboxes have a spawned shim.
struct Zygote {
  std::vector<std::string> modules;
  std::shared_ptr<ForkServer> server;
  std::chrono::steady_clock::time_point started;
  std::chrono::seconds restart_delay{0};
  bool restarting = false;
  int restarts = 0;
};

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
    if (setup.ok) ReapOrphans();
    DecideRootless();
    DecideIds();
    StartForkServers();
    if (opts_.recycle_sandboxes) {
      const std::string why_not = RecyclingUnavailable();
      if (why_not.empty()) {
        recycle_bin_ = std::make_shared<RecycleBin>(kRecycleBinCapacity, kRecycledMaxIdle);
      }
      spdlog::info("execution sandboxes: {}", why_not.empty()
                                                  ? "recycled for their API key's next execution"
                                                  : "not recycled: " + why_not);
    }
  }
  ~LocalExecutor() override { *alive_ = false; }

  std::string_view name() const override { return "local"; }
  bool supports_sessions() const override { return true; }
  bool runs_lean_python() const override { return true; }

  // Where Python programs are to come from the fork servers: whether they serve now, and how
  // often one was replaced.
  std::vector<BackendMetric> metrics() const override {
    bool any = false, up = true;
    int restarts = 0;
    for (const Zygote& z : zygotes_) {
      if (!z.server) continue;  // none configured, or it never started
      any = true;
      up = up && z.server->Ready();
      restarts += z.restarts;
    }
    if (!any) return {};
    return {
        {"code_interpreter_fork_server_up", "gauge",
         "1 while the fork servers serve, 0 while one is being restarted.", up ? 1.0 : 0.0},
        {"code_interpreter_fork_server_restarts_total", "counter",
         "Fork servers started to replace one that died or hung.", static_cast<double>(restarts)}};
  }

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
    if (!ids_error_.empty()) co_return Status::Error(ids_error_);
    const bool recyclable = Recyclable(spec);
    if (recyclable) {
      auto take = TakeRecycled(spec);
      std::unique_ptr<Sandbox> recycled = co_await std::move(take);
      if (recycled) co_return recycled;
    }
    // The fork server's sandboxes see the host's root only (its /tmp is private).
    // Held here: a restart may replace the server while this request awaits it.
    Zygote& zygote = ZygoteFor(spec);
    std::shared_ptr<ForkServer> server = zygote.server;
    Result<ShimHandles> shim = Status::Error("no fork server");  // a sandbox's parent
    if (server && spec.rootfs == "host" && server->Ready()) {
      shim = co_await server->NewSandbox();
      if (!server->Ready()) {
        ReapOrphans();  // its sandboxes died with it (their init's death signal): their cgroups
        RestartForkServer(zygote, server);
      }
    }
    // A spawned shim's sandbox stands in for the fork server's while that is being replaced: not
    // kept, so that the server's sandboxes take over again once it is back.
    const bool keep = recyclable && (shim.ok() || !zygote.server || spec.rootfs != "host");
    if (!shim.ok()) shim = SpawnShim(opts_.shim_binary);
    if (!shim.ok()) co_return shim.status().Context("preparing a local sandbox");
    auto sandbox =
        std::make_unique<LocalSandbox>(ex_, std::move(shim.value()), spec, pending_teardowns_);
    Result<std::string> bpf = CompiledSeccomp(spec.security);
    if (!bpf.ok()) co_return bpf.status().Context("the sandbox's seccomp profile");
    Plan plan = PlanFromSpec(spec, layout, std::move(bpf).value());
    plan.rootless = rootless_;
    plan.host_uids = host_uids_;
    plan.host_gids = host_gids_;
    plan.id_lock_dir = id_lock_dir_;
    Status started = co_await sandbox->Start(plan, kPrepareTimeout);
    if (!started.ok() && !userns_blocker_.empty()) {
      // AppArmor may let the clone succeed and then refuse every mount inside: name the cause.
      started = Status::Error(started.message() + "; likely cause: " + userns_blocker_);
    }
    if (started.ok() && !spec.prestart_argv.empty()) {
      auto prestart = sandbox->Prestart(spec.prestart_argv);
      started = co_await std::move(prestart);
    }
    if (!started.ok()) {
      sandbox->Kill();
      co_await sandbox->Destroy();  // its parent removes the cgroup
      co_return started;
    }
    if (keep) sandbox->RecycleInto(recycle_bin_, RecycleSpec(spec));
    co_return std::unique_ptr<Sandbox>(std::move(sandbox));
  }

  // Why sandboxes cannot be recycled here, or "": each needs a cgroup of its own whose memory
  // peak can be reset (cgroup v1, or v2's memory.peak writable: Linux 6.12+) and an init that is
  // another user than the program.
  std::string RecyclingUnavailable() const {
    if (!detected_ || no_cgroup_) return "no cgroup of their own";
    if (rootless_ && host_uids_.empty()) return "init is the program's user (one id)";
    struct stat st {};
    if (layout_.version == 2 && (::stat((layout_.root + "/memory.peak").c_str(), &st) != 0 ||
                                 (st.st_mode & S_IWUSR) == 0)) {
      return "cgroup v2's memory.peak cannot be reset before Linux 6.12";
    }
    return "";
  }

  bool Recyclable(const SandboxSpec& spec) const {
    return spec.session_expires_at == 0 && !spec.egress && recycle_bin_;
  }

  // A sandbox that last ran this client's program, put back (sandbox_recycle.cc), with the
  // spec's program pre-started in it; null when none is waiting or its start failed.
  asio::awaitable<std::unique_ptr<Sandbox>> TakeRecycled(const SandboxSpec& spec) override {
    if (!Recyclable(spec)) co_return nullptr;
    const SandboxSpec key = RecycleSpec(spec);
    for (;;) {
      std::vector<std::shared_ptr<SandboxCore>> stale;
      std::shared_ptr<SandboxCore> core = recycle_bin_->Take(key, spec.client, &stale);
      for (auto& dead : stale) {
        LocalSandbox gone(std::move(dead), spec);
        co_await gone.Destroy();
      }
      if (!core) co_return nullptr;
      auto sandbox = std::make_unique<LocalSandbox>(std::move(core), spec);
      Status started;
      if (!spec.prestart_argv.empty()) {
        auto prestart = sandbox->Prestart(spec.prestart_argv);
        started = co_await std::move(prestart);
      }
      if (started.ok()) co_return sandbox;
      spdlog::debug("a recycled sandbox failed its prestart: {}", started.message());
      sandbox->Kill();
      co_await sandbox->Destroy();
    }
  }

  asio::awaitable<Status> Check() override { co_return CheckLocalRuntime(opts_); }

  // The teardowns Destroy left finishing (the shims' cgroup removals and exits).
  asio::awaitable<void> Drain() override {
    if (recycle_bin_) {
      for (auto& core : recycle_bin_->Close()) {
        LocalSandbox sandbox(std::move(core), SandboxSpec{});
        co_await sandbox.Destroy();
      }
    }
    while (*pending_teardowns_ > 0) co_await Sleep(std::chrono::milliseconds(2));
  }

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
    plan.host_uids = host_uids_;
    plan.host_gids = host_gids_;
    using K = MeasureKind;
    Enforcement e;
    e.enforced = {{K::kUserNamespace, 0, plan.TwoIds() ? "" : "one id: the daemon's user"},
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
    AddIdsAndQuotas(plan, e);
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
  // The sandbox's ids (sandbox_ids.h), init's identity (userns.h) and the kernel quotas
  // (kernel_quotas.h), from the plan's fields.
  void AddIdsAndQuotas(const Plan& plan, Enforcement& e) const {
    using K = MeasureKind;
    e.enforced.push_back({K::kNoTerminal, 0, "own session, no /dev/tty"});
    e.enforced.push_back({K::kOpenFilesLimit, plan.open_files, "RLIMIT_NOFILE"});
    e.enforced.push_back({K::kQueuedSignalsLimit, plan.queued_signals, "RLIMIT_SIGPENDING"});
    e.enforced.push_back({K::kMessageQueueLimit, plan.message_queue_bytes, "RLIMIT_MSGQUEUE"});
    e.enforced.push_back({K::kLockedMemoryLimit, plan.locked_memory_bytes, "RLIMIT_MEMLOCK"});
    e.enforced.push_back({K::kUserNamespaceQuotas, 0, "inotify 32, no nested namespaces"});
    const std::string range =
        plan.host_uids.empty()
            ? std::string()
            : std::to_string(plan.host_uids.first) + "-" +
                  std::to_string(plan.host_uids.first + plan.host_uids.count - 1);
    if (!plan.rootless) {
      e.enforced.push_back({K::kOwnHostIds, 0, range + ", owner of its user namespace"});
      e.enforced.push_back({K::kInitUnreachable, 0, "own uid inside"});
      return;
    }
    e.downgrades.push_back(
        {"user namespace owned by the sandbox's own uid",
         "the sandboxes' user namespaces belong to the daemon's user, so its per-user counters "
         "(inotify instances, queued signals, message queue bytes) are shared by its sandboxes, "
         "each bounded by its namespace's own quotas",
         "run the daemon as root: each sandbox's user namespace is then created by a host uid of "
         "its own"});
    if (plan.TwoIds()) {
      e.enforced.push_back({K::kOwnHostIds, 0, "subordinate ids " + range});
      e.enforced.push_back({K::kInitUnreachable, 0, "own uid inside"});
      return;
    }
    const std::string fix =
        "give the daemon's user subordinate ids (usermod --add-subuids FIRST-LAST --add-subgids "
        "FIRST-LAST USER) and install the uidmap package";
    e.downgrades.push_back({MeasureName({K::kInitUnreachable}),
                            one_id_reason_ + ": init and the program share one uid, so the "
                                             "program can signal and prlimit init",
                            fix});
    e.downgrades.push_back({MeasureName({K::kOwnHostIds}),
                            one_id_reason_ + ": every sandbox runs as the daemon's user", fix});
  }

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
  // Sandboxes of a daemon killed without its shutdown (or whose parent, a shim or the fork
  // server's zygote, was killed by a signal) leave their cgroups behind: remove those whose
  // parent is gone. Live sandboxes' cgroups, of any daemon, stay.
  void ReapOrphans() {
    std::vector<std::string> failures;
    for (const std::string& dir : ReapOrphanCgroups(layout_, &failures)) {
      spdlog::info("cgroups: removed {}, left by a sandbox whose parent is gone", dir);
    }
    for (const std::string& f : failures) spdlog::warn("cgroups: could not remove {}", f);
  }
  // Host ids (sandbox_ids.h): as root the configured range; rootless the daemon user's
  // subordinate ids when it has them and newuidmap/newgidmap are installed, else the one-id map.
  void DecideIds() {
    if (!rootless_) {
      host_uids_ = host_gids_ = opts_.sandbox_ids;
      id_lock_dir_ =
          opts_.id_lock_dir.empty() ? "/run/code-interpreter/sandbox-ids" : opts_.id_lock_dir;
    } else {
      const uid_t uid = ::geteuid();
      const struct passwd* pw = ::getpwuid(uid);
      const std::string user = pw != nullptr ? pw->pw_name : std::to_string(uid);
      IdRange uids = SubordinateIds(opts_.subuid_file, user, uid);
      IdRange gids = SubordinateIds(opts_.subgid_file, user, uid);
      const char* xdg = std::getenv("XDG_RUNTIME_DIR");
      id_lock_dir_ = !opts_.id_lock_dir.empty() ? opts_.id_lock_dir
                     : xdg != nullptr && *xdg == '/'
                         ? std::string(xdg) + "/code-interpreter-sandbox-ids"
                         : "/tmp/code-interpreter-sandbox-ids-" + std::to_string(uid);
      if (uids.empty() || gids.empty()) {
        one_id_reason_ = "the daemon's user (" + user + ") has no subordinate ids in " +
                         (uids.empty() ? opts_.subuid_file : opts_.subgid_file);
      } else if (!OnPath("newuidmap") || !OnPath("newgidmap")) {
        one_id_reason_ = "newuidmap/newgidmap are not installed";
      } else if (SysError e = PrepareIdLockDir(id_lock_dir_); !e.ok()) {
        one_id_reason_ = e.what;
      } else {
        host_uids_ = uids;
        host_gids_ = gids;
      }
      if (!one_id_reason_.empty()) return;
    }
    if (SysError e = PrepareIdLockDir(id_lock_dir_); !e.ok()) {
      ids_error_ = "sandbox ids: " + e.what + ": " + std::strerror(e.err);
    }
  }
  // Root only: it must create user namespaces owned by each sandbox's own uid. A second, lean
  // one where LocalExecutorOptions::lean_imports asks for it.
  void StartForkServers() {
    if (!opts_.fork_server || rootless_ || !OnPath("python3")) return;
    zygotes_[0].modules = opts_.warm_imports;
    zygotes_[1].modules = opts_.lean_imports;
    for (Zygote& z : zygotes_) {
      if (&z != &zygotes_[0] && (z.modules.empty() || z.modules == zygotes_[0].modules)) continue;
      auto server = ForkServer::Start(ex_, opts_.shim_binary, opts_.sandbox_env, z.modules,
                                      opts_.compiled_ahead);
      if (!server.ok()) {
        spdlog::warn("fork server: {}; Python sandboxes start their own interpreter",
                     server.status().message());
        continue;
      }
      z.server = std::move(server).value();
      z.started = std::chrono::steady_clock::now();
      std::string modules;
      for (const std::string& m : z.modules) modules += (modules.empty() ? "" : ", ") + m;
      spdlog::info("fork server ready: Python programs run in a pre-loaded interpreter ({})",
                   modules);
    }
  }

  // The fork server of a spec's sandboxes: the lean one for a spec without warm imports, where
  // there is one (a lean server whose start failed sends its sandboxes to the other).
  Zygote& ZygoteFor(const SandboxSpec& spec) {
    return spec.warm_imports.empty() && zygotes_[1].server ? zygotes_[1] : zygotes_[0];
  }

  // A zygote that died or hung is replaced, on the event loop (requests meanwhile exec their
  // interpreter). One that fails again within a minute of its start waits longer each time (1 s
  // doubling to 5 min): a zygote that cannot live does not cost a restart per request.
  void RestartForkServer(Zygote& z, const std::shared_ptr<ForkServer>& failed) {
    if (z.restarting || z.server != failed) return;
    z.restarting = true;
    const auto now = std::chrono::steady_clock::now();
    z.restart_delay = now - z.started >= 60s ? 0s
                      : z.restart_delay == 0s
                          ? 1s
                          : std::min<std::chrono::seconds>(z.restart_delay * 2, 300s);
    asio::co_spawn(ex_, RestartForkServerAfter(z, z.restart_delay, alive_), asio::detached);
  }

  asio::awaitable<void> RestartForkServerAfter(Zygote& z, std::chrono::seconds delay,
                                               std::shared_ptr<bool> alive) {
    spdlog::warn("fork server: restarting it{}",
                 delay == 0s ? std::string() : " in " + std::to_string(delay.count()) + " s");
    for (;;) {
      co_await Sleep(delay);
      if (!*alive) co_return;
      auto server = co_await ForkServer::StartAsync(ex_, opts_.shim_binary, opts_.sandbox_env,
                                                    z.modules, opts_.compiled_ahead);
      if (!*alive) co_return;  // the executor is gone: the new server goes with this frame
      if (server.ok()) {
        z.server = std::move(server).value();
        z.started = std::chrono::steady_clock::now();
        z.restarting = false;
        ++z.restarts;
        spdlog::info("fork server restarted (restart {} since the daemon started)", z.restarts);
        co_return;
      }
      delay = std::max<std::chrono::seconds>(delay * 2, 1s);
      delay = std::min<std::chrono::seconds>(delay, 300s);
      spdlog::warn("fork server: the restart failed: {}; next try in {} s",
                   server.status().message(), delay.count());
    }
  }

  static bool OnPath(const std::string& name) {
    for (const char* dir : {"/usr/bin/", "/bin/", "/usr/local/bin/", "/usr/sbin/"}) {
      if (::access((dir + name).c_str(), X_OK) == 0) return true;
    }
    return false;
  }

  asio::any_io_executor ex_;
  LocalExecutorOptions opts_;
  CgroupLayout layout_;
  bool detected_ = false;
  std::string detect_error_;
  bool rootless_ = false;
  bool no_cgroup_ = false;
  std::string no_cgroup_reason_;
  std::string userns_blocker_;  // rootless: the host setting that blocks user namespaces, or ""
  IdRange host_uids_;
  IdRange host_gids_;
  std::string id_lock_dir_;
  std::string one_id_reason_;  // rootless: why init shares the program's id, or ""
  std::string ids_error_;      // the lock directory cannot be used: every Prepare fails with it
  // [0] with opts_.warm_imports, [1] the lean one (lean_imports).
  std::array<Zygote, 2> zygotes_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // false once destroyed
  std::shared_ptr<std::atomic<int>> pending_teardowns_ = std::make_shared<std::atomic<int>>(0);
  // Execution sandboxes waiting for their client's next execution (recycle_bin.h); null: every
  // sandbox is removed after its execution (LocalExecutorOptions::recycle_sandboxes).
  std::shared_ptr<RecycleBin> recycle_bin_;
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

}  // namespace ci::runtime
