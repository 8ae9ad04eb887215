// The local Executor: detects cgroups once, then spawns one shim per sandbox.
#include "runtime/local_executor.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>

#include "runtime/cgroups.h"
#include "runtime/local_sandbox.h"
#include "runtime/plan.h"
#include "runtime/shim_spawn.h"

namespace ci {
namespace {

using namespace std::chrono_literals;

constexpr auto kPrepareTimeout = 10s;

class LocalExecutor final : public Executor {
 public:
  LocalExecutor(asio::any_io_executor ex, LocalExecutorOptions opts)
      : ex_(std::move(ex)), opts_(std::move(opts)) {
    detected_ = DetectCgroups(opts_.cgroup_root, &layout_, &detect_error_);
  }

  std::string_view name() const override { return "local"; }

  asio::awaitable<Result<std::unique_ptr<Sandbox>>> Prepare(const SandboxSpec& spec) override {
    if (Status s = Validate(spec); !s.ok()) co_return s.Context("invalid sandbox spec");
    CgroupLayout layout = layout_;
    if (!spec.cgroup_root.empty()) {
      std::string why;
      if (!DetectCgroups(spec.cgroup_root, &layout, &why)) co_return Status::Error(why);
    } else if (!detected_) {
      co_return Status::Error(detect_error_);
    }
    Result<ShimHandles> shim = SpawnShim(opts_.shim_binary);
    if (!shim.ok()) co_return shim.status().Context("preparing a local sandbox");
    auto sandbox = std::make_unique<LocalSandbox>(ex_, std::move(shim.value()), spec);
    const Plan plan = PlanFromSpec(spec, layout);
    Status started = co_await sandbox->Start(plan, kPrepareTimeout);
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

  Enforcement enforcement() const override {
    Enforcement e;
    e.enforced = {"user namespace", "pid namespace",   "mount namespace", "network namespace",
                  "read-only root", "no capabilities", "no_new_privs",    "rlimit cpu"};
    if (detected_) {
      e.enforced.push_back("memory and pids limits (cgroup)");
    } else {
      e.downgrades.push_back({"memory and pids limits (cgroup)", detect_error_,
                              "run as root on a host with cgroup memory and pids controllers"});
    }
    return e;
  }

 private:
  asio::any_io_executor ex_;
  LocalExecutorOptions opts_;
  CgroupLayout layout_;
  bool detected_ = false;
  std::string detect_error_;
};

}  // namespace

std::unique_ptr<Executor> MakeLocalExecutor(asio::any_io_executor ex, LocalExecutorOptions opts) {
  ::signal(SIGPIPE, SIG_IGN);
  return std::make_unique<LocalExecutor>(std::move(ex), std::move(opts));
}

Status CheckLocalRuntime(const LocalExecutorOptions& opts) {
  std::ifstream max_userns("/proc/sys/user/max_user_namespaces");
  long max = 0;
  if (!(max_userns >> max) || max <= 0) {
    return Status::Error(
        "user namespaces are disabled (/proc/sys/user/max_user_namespaces is 0): set it to a "
        "positive value, e.g. sysctl user.max_user_namespaces=15000");
  }
  for (const char* ns : {"user", "pid", "mnt", "net", "ipc", "uts", "cgroup"}) {
    if (::access((std::string("/proc/self/ns/") + ns).c_str(), F_OK) != 0) {
      return Status::Error(std::string("the kernel lacks ") + ns + " namespaces");
    }
  }
  CgroupLayout layout;
  std::string why;
  if (!DetectCgroups(opts.cgroup_root, &layout, &why)) return Status::Error(why);
  if (::access(opts.shim_binary.c_str(), X_OK) != 0) {
    return Status::Errno("shim binary " + opts.shim_binary + " is not executable", errno);
  }
  return {};
}

}  // namespace ci
