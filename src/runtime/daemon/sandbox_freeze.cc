// LocalSandbox::Freeze: the sandbox's cgroup freezer, written by the daemon (v2 cgroup.freeze,
// v1 the freezer hierarchy's freezer.state) and polled until the kernel says it got there.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>

#include "core/sleep.h"
#include "runtime/daemon/local_sandbox.h"
#include "runtime/daemon/sandbox_oom.h"

namespace ci::runtime {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A freeze waits for every task to stop (one in the kernel, e.g. in a page fault, stops on its
// way out); one that takes longer than this is undone and reported.
constexpr auto kFreezeTimeout = 2s;

// The sandbox's freezer, or why there is none.
Result<CgroupFreezer> FindFreezer(const SandboxCore& core) {
  const CgroupLayout& layout = core.cgroup;
  if (layout.version != 1 && layout.version != 2) {
    return Status::Unavailable(
        "freeze",
        "the sandbox has no cgroup of its own to freeze (a rootless daemon without a writable, "
        "delegated cgroup v2 subtree: run it as root, or under systemd with Delegate=yes)");
  }
  const std::string name = FindSandboxCgroupName(core.pid, core.init_pid, layout);
  if (name.empty()) return Status::Error("freeze: the sandbox's cgroup was not found");
  CgroupFreezer f;
  f.version = layout.version;
  f.dir = layout.version == 2 ? layout.root + "/" + name
                              : layout.root + "/freezer/" + kCgroupParent + "/" + name;
  if (cgfs::Exists(f.control())) return f;
  if (layout.version == 2) {
    return Status::Unavailable("freeze",
                               "no " + f.control() + " (the cgroup v2 freezer needs Linux 5.2+)");
  }
  return Status::Unavailable("freeze", "no cgroup v1 freezer hierarchy at " + layout.root +
                                           "/freezer (mount the freezer controller there)");
}

// Polls until the kernel reports `frozen`, at most kFreezeTimeout; false on timeout. A v1 freeze
// is asked again at each poll: the kernel tries each task once per write, and a task that went
// into a freezable sleep just after its try (a vfork parent) would stay FREEZING for ever.
asio::awaitable<bool> AwaitState(const SandboxCore& core, const CgroupFreezer& f, bool frozen) {
  const auto deadline = Clock::now() + kFreezeTimeout;
  Clock::duration pause = 200us;
  while (IsFrozen(f) != frozen) {
    if (Clock::now() >= deadline || core.state == SandboxCore::State::kDestroyed) co_return false;
    co_await Sleep(pause);
    pause = std::min<Clock::duration>(pause * 2, 2ms);
    if (frozen && f.version == 1) (void)WriteFrozen(f, true);
  }
  co_return true;
}

// Writes the state, waits for it; on failure core.frozen says whether it may still be frozen.
asio::awaitable<Status> SetFrozen(SandboxCore& core, const CgroupFreezer& f, bool frozen) {
  const char* what = frozen ? "freeze" : "thaw";
  if (SysError e = WriteFrozen(f, frozen); !e.ok()) {
    core.frozen = !frozen || FreezeAsked(f);
    if (e.err == ENOENT) co_return DeadSandboxError(core, what);
    co_return Status::Errno(std::string(what) + ": " + e.what, e.err);
  }
  if (co_await AwaitState(core, f, frozen)) {
    core.frozen = frozen;
    co_return Status();
  }
  if (core.state == SandboxCore::State::kDestroyed) {
    co_return Status::Error(std::string(what) + ": the sandbox was destroyed meanwhile");
  }
  if (frozen) {
    // Never left half frozen: its processes go on as before.
    (void)WriteFrozen(f, false);
    core.frozen = !co_await AwaitState(core, f, false);
  }
  co_return Status::Error(std::string(what) + ": the cgroup " + f.dir + " was not " +
                          (frozen ? "frozen" : "thawed") + " within " +
                          std::to_string(kFreezeTimeout / 1ms) + " ms" +
                          (frozen ? " (thawed again)" : ""));
}

asio::awaitable<Status> FreezeOnStrand(std::shared_ptr<SandboxCore> core, bool frozen) {
  const char* what = frozen ? "freeze" : "thaw";
  if (core->killed) co_return DeadSandboxError(*core, what);
  if (core->state == SandboxCore::State::kDestroyed) {
    co_return Status::Error(std::string(what) + ": the sandbox is destroyed");
  }
  if (!core->session) co_return Status::Error(std::string(what) + ": not a session sandbox");
  if (core->state != SandboxCore::State::kReady) {
    co_return Status::Error(std::string(what) + ": the sandbox is busy with a run");
  }
  if (!core->freezer) {
    Result<CgroupFreezer> found = FindFreezer(*core);
    if (!found.ok()) co_return found.status();
    core->freezer = *found;
  }
  const CgroupFreezer f = *core->freezer;
  // Busy meanwhile (another Freeze, a run: refused), and refused after it until thawed.
  const auto before = core->state;
  core->state = SandboxCore::State::kRunning;
  core->frozen = true;
  Status out = co_await SetFrozen(*core, f, frozen);
  if (core->state == SandboxCore::State::kRunning) core->state = before;
  co_return out;
}

}  // namespace

asio::awaitable<Status> LocalSandbox::Freeze(bool frozen) {
  auto task = FreezeOnStrand(core_, frozen);
  co_return co_await OnStrand<Status>(core_->strand, std::move(task));
}

}  // namespace ci::runtime
