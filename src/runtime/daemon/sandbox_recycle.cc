// LocalSandbox's recycling (issue 35): after an execution, init puts the sandbox back as it
// started (Msg::kRecycle: every process but init killed and reaped, the writable places wiped,
// System V IPC removed); the daemon then checks the cgroup holds init alone, resets its memory
// peak, notes its counters (the next execution reports what grew since) and gives it new stdio
// pipes. Any failure on the way ends the sandbox instead.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/steady_timer.hpp>
#include <cstring>

#include "runtime/daemon/frame_io.h"
#include "runtime/daemon/local_sandbox.h"
#include "runtime/daemon/sandbox_oom.h"
#include "runtime/kernel/cgroups.h"

namespace ci::runtime {
namespace {

using proto::Msg;
using namespace std::chrono_literals;

// The executions one sandbox serves at most (as the Docker backend's containers).
constexpr uint32_t kMaxExecutions = 500;

// The sandbox's directory for a v1 controller, or its one v2 directory.
std::string CgroupDir(const SandboxCore& core, const char* v1_controller) {
  const CgroupLayout& l = core.cgroup;
  if (l.version == 2) return l.root + "/" + core.recycle.cgroup_name;
  return l.root + "/" + v1_controller + "/" + kCgroupParent + "/" + core.recycle.cgroup_name;
}

bool ReadPeak(SandboxCore& core, uint64_t* bytes) {
  if (core.cgroup.version == 1) {
    return cgfs::ReadU64(CgroupDir(core, "memory") + "/memory.max_usage_in_bytes", bytes);
  }
  if (!core.recycle.peak_fd.valid()) {
    return cgfs::ReadU64(CgroupDir(core, "") + "/memory.peak", bytes);
  }
  char buf[32] = {};
  ssize_t n = ::pread(core.recycle.peak_fd.get(), buf, sizeof buf - 1, 0);
  if (n <= 0) return false;
  *bytes = std::strtoull(buf, nullptr, 10);
  return true;
}

// False when a counter cannot be read: nothing can then be told per execution.
bool ReadCounts(SandboxCore& core, CgroupCounts* out) {
  const bool v2 = core.cgroup.version == 2;
  const std::string memory = CgroupDir(core, "memory");
  const std::string pids = CgroupDir(core, "pids");
  uint64_t usage = 0;
  bool ok = v2 ? cgfs::ReadKey(memory + "/cpu.stat", "usage_usec", &usage)
               : cgfs::ReadU64(CgroupDir(core, "cpuacct") + "/cpuacct.usage", &usage);
  out->cpu_ms = v2 ? usage / 1000 : usage / 1000000;
  ok = ok && cgfs::ReadKey(memory + (v2 ? "/memory.events" : "/memory.oom_control"), "oom_kill",
                           &out->oom_kills);
  ok = ok && cgfs::ReadKey(pids + "/pids.events", "max", &out->pids_limit_hits);
  return ok && ReadPeak(core, &out->memory_peak_bytes);
}

// The memory peak starts again from the current usage. v2 (Linux 6.12+): per open file, so the
// daemon keeps the one it wrote to and reads through it.
bool ResetPeak(SandboxCore& core) {
  if (core.cgroup.version == 1) {
    return cgfs::WriteFile(CgroupDir(core, "memory") + "/memory.max_usage_in_bytes", "0").ok();
  }
  if (!core.recycle.peak_fd.valid()) {
    const std::string file = CgroupDir(core, "") + "/memory.peak";
    core.recycle.peak_fd.reset(::open(file.c_str(), O_RDWR | O_CLOEXEC));
  }
  return core.recycle.peak_fd.valid() && ::pwrite(core.recycle.peak_fd.get(), "reset", 5, 0) == 5;
}

// The cgroup lists init and nothing else.
bool OnlyInitLeft(const SandboxCore& core) {
  const std::vector<std::string> pids = cgfs::ReadWords(CgroupDir(core, "pids") + "/cgroup.procs");
  return pids.size() == 1 && (core.init_pid <= 0 || pids[0] == std::to_string(core.init_pid));
}

// Init's answer to kRecycle, within 5 s (its kill waits for the dead; a wipe of a full tmpfs).
asio::awaitable<Status> AskInit(std::shared_ptr<SandboxCore> core) {
  if (Status s = co_await WriteFrameAsync(core->service, Msg::kRecycle); !s.ok()) {
    co_return DeadSandboxError(*core, "recycle");
  }
  auto answered = std::make_shared<bool>(false);
  asio::steady_timer guard(core->strand, 5s);
  guard.async_wait([core, answered](boost::system::error_code e) {
    if (e || *answered) return;
    boost::system::error_code ignored;
    core->service.cancel(ignored);
  });
  Result<Frame> frame = co_await ReadFrameAsync(core->service);
  *answered = true;
  guard.cancel();
  if (!frame.ok() || frame->eof) co_return Status::Error("init did not answer");
  if (frame->type == Msg::kError) {
    std::string message;
    proto::DecodeError(frame->payload, &message);
    co_return Status::Error(message);
  }
  if (frame->type != Msg::kRecycled) co_return Status::Error("unexpected reply from init");
  co_return Status();
}

}  // namespace

asio::awaitable<std::optional<ResourceReport>> RecycleOnStrand(std::shared_ptr<SandboxCore> core) {
  RecycleState& r = core->recycle;
  if (r.cgroup_name.empty()) {
    r.cgroup_name = FindSandboxCgroupName(core->pid, core->init_pid, core->cgroup);
  }
  CgroupCounts now;
  if (r.cgroup_name.empty() || !ReadCounts(*core, &now)) co_return std::nullopt;
  ResourceReport& report = core->report;
  const uint64_t cpu = now.cpu_ms > r.baseline.cpu_ms ? now.cpu_ms - r.baseline.cpu_ms : 0;
  report.cpu_ms = cpu - std::min(cpu, core->prestart_cpu_ms);
  report.oom_killed = now.oom_kills > r.baseline.oom_kills;
  report.pids_limit_hit = now.pids_limit_hits > r.baseline.pids_limit_hits;
  report.memory_peak_bytes = now.memory_peak_bytes;
  r.report_read = true;
  if (core->state != SandboxCore::State::kRan || core->killed || core->frozen || core->session ||
      r.executions + 1 >= kMaxExecutions) {
    co_return std::nullopt;
  }
  // The peak first: where it cannot be reset nothing else is done.
  Status s = ResetPeak(*core) ? Status() : Status::Errno("resetting the memory peak", errno);
  if (s.ok()) s = co_await AskInit(core);
  if (s.ok() && !OnlyInitLeft(*core)) s = Status::Error("the cgroup holds more than init");
  if (s.ok() && !ReadCounts(*core, &r.baseline)) s = Status::Error("the counters are unreadable");
  if (s.ok()) s = ReplacePipes(*core);
  if (!s.ok()) {
    spdlog::debug("sandbox not recycled: {}", s.message());
    co_return std::nullopt;
  }
  core->state = SandboxCore::State::kReady;
  core->prestarted = false;
  core->prestart_cpu_ms = 0;
  ++r.executions;
  r.report_read = false;
  r.in_bin = r.bin->Put(core);
  if (!r.in_bin) {
    r.report_read = true;
    co_return std::nullopt;
  }
  co_return report;
}

}  // namespace ci::runtime
