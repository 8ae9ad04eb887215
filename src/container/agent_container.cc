#include "container/agent_container.h"

#include <dirent.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>
#include <chrono>
#include <optional>

#include "agent/agent_wire.h"
#include "container/cgroup_probe.h"
#include "container/container_exec.h"
#include "container/sandbox_counters.h"
#include "core/unix_time.h"

namespace ci::container {
namespace {

using namespace std::chrono_literals;

// The agent's recycle kills and reaps, empties the writable places, removes IPC objects.
constexpr auto kRecycleTimeout = 10s;
// A container is not put back when the reaper would remove it this soon (its expires-at label).
constexpr int64_t kExpiryMarginSec = 120;

class AgentContainer final : public ContainerApi,
                             public std::enable_shared_from_this<AgentContainer> {
 public:
  AgentContainer(std::string id, std::shared_ptr<ContainerApi> engine,
                 std::shared_ptr<AgentChannel> channel, std::vector<std::string> env,
                 std::string cwd, Recycling recycling)
      : id_(std::move(id)),
        engine_(std::move(engine)),
        channel_(std::move(channel)),
        env_(std::move(env)),
        cwd_(std::move(cwd)),
        recycling_(std::move(recycling)) {}

  asio::awaitable<Result<std::shared_ptr<ExecStream>>> Exec(const std::vector<std::string>& cmd,
                                                            ExecStdin stdin_use) override {
    co_return co_await channel_->Exec(cmd, env_, cwd_, stdin_use.attach);
  }
  asio::awaitable<Result<std::shared_ptr<ExecStream>>> ForkPython(
      const std::vector<std::string>& argv) override {
    co_return co_await channel_->Exec(argv, env_, cwd_, true, true);
  }
  asio::awaitable<std::optional<Status>> WriteFiles(
      const std::vector<std::pair<std::string, std::string>>& files) override {
    co_return co_await channel_->WriteFiles(cwd_, files);
  }
  asio::awaitable<std::optional<Result<std::string>>> ReadCounters(uint8_t extras) override {
    co_return co_await channel_->ReadCounters(extras);
  }
  asio::awaitable<std::optional<bool>> HoldsNothing(const std::string& dir,
                                                    const std::string& skip_path) override {
    auto listed = co_await channel_->ListDir(dir);
    if (!listed || !listed->ok()) co_return std::nullopt;
    for (const agent::DirEntry& e : **listed) {
      if (e.name != skip_path || e.type != DT_REG) co_return false;
    }
    co_return true;
  }
  asio::awaitable<bool> SetPidsHeadroom(int step) override {
    co_return co_await engine_->SetPidsHeadroom(step);
  }
  asio::awaitable<pid_t> HostInitPid() override { co_return co_await engine_->HostInitPid(); }
  bool KillAllBut(const std::string* background) override {
    channel_->KillAll(background);
    return true;
  }
  void Claim(const std::string& client) override { client_ = client; }
  asio::awaitable<Result<std::shared_ptr<InsideListener>>> ListenInside(
      uint16_t port, asio::any_io_executor serve) override {
    co_return co_await channel_->ListenInside(port, std::move(serve));
  }

  // After the counters were read: recycled in the background when it can be, else removed.
  asio::awaitable<void> Remove(ResourceReport& report) override {
    if (!recycling_.bin || killed_ || channel_->ended()) {
      channel_->Close();
      co_return co_await engine_->Remove(report);
    }
    ++recycling_.removals->in_flight;
    asio::co_spawn(co_await asio::this_coro::executor, RecycleOrRemove(shared_from_this()),
                   asio::detached);
  }

  // The agent (PID 1) is paused with the rest: the Engine's.
  asio::awaitable<Status> Pause(bool paused) override { co_return co_await engine_->Pause(paused); }

  void Kill() override {
    killed_ = true;
    channel_->KillAll(nullptr);
    channel_->Close();
    engine_->Kill();
  }

 private:
  static asio::awaitable<void> RecycleOrRemove(std::shared_ptr<AgentContainer> self) {
    Status s = co_await self->Recycle();
    if (!s.ok()) {
      spdlog::debug("{}: not recycled: {}", self->id_.substr(0, 12), s.message());
      self->channel_->Close();
      ResourceReport ignored;  // the execution's report went out already
      co_await self->engine_->Remove(ignored);
    }
    --self->recycling_.removals->in_flight;
  }

  asio::awaitable<Status> Recycle() {
    ++executions_;
    const int64_t now = UnixSeconds();
    if (!client_) co_return Status::Error("it ran no program");
    if (executions_ >= recycling_.max_executions) co_return Status::Error("served its share");
    if (now > recycling_.expires_at - kExpiryMarginSec) co_return Status::Error("expires soon");
    Status s = co_await channel_->Recycle(kRecycleTimeout);
    if (!s.ok()) co_return s;
    Result<CgroupCounters> counters = Status::Error("not read");
    if (recycling_.counters_inside) {
      counters = co_await CountersInside();
    } else {
      counters = co_await CountersHere();
    }
    if (!counters.ok()) co_return counters.status();
    RecycledContainer back{
        id_, shared_from_this(), channel_,
        CountersBaseline{counters->cpu_ms, counters->oom_kills, counters->pids_limit_hits}};
    if (!recycling_.bin->Put(RecycleBinKey(recycling_.key, *client_), std::move(back))) {
      co_return Status::Error("the recycle bin is full or closed");
    }
    co_return Status();
  }

  // The processes the agent's recycle left: it and its fork server.
  int ProcessesAllowed() const { return channel_->has_fork_server() ? 2 : 1; }

  // From this host (a local Engine): the container's cgroup, its memory peak reset.
  asio::awaitable<Result<CgroupCounters>> CountersHere() {
    // Per-execution counters need the cgroup on this host and a memory peak that can start over.
    if (!host_looked_up_) {
      host_looked_up_ = true;
      pid_t init_pid = 0;
      host_ = co_await LocateHostCgroup(*engine_, id_, &init_pid);
    }
    if (!host_) co_return Status::Error("its cgroup is not readable here");
    if (Status s = Leftovers(CountHostCgroupProcesses(*host_), ProcessesAllowed()); !s.ok()) {
      co_return s;
    }
    if (!ResetHostMemoryPeak(*host_)) co_return Status::Error("its memory peak cannot be reset");
    co_return ParseCgroupFiles(ReadHostCgroupFiles(*host_));
  }

  // From inside (a pod): the same count and counters, read by the agent itself, or by an exec of
  // its (an older agent's), which is one more process in the cgroup.
  asio::awaitable<Result<CgroupCounters>> CountersInside() {
    auto read = co_await channel_->ReadCounters(agent::kCountProcesses);
    int probes = 0;
    if (!read) {
      read = co_await ProbeByExec();
      probes = 1;
    }
    if (!read->ok()) co_return read->status().Context("the recycled container's probe");
    const CgroupFiles files = SplitProbeOutput(**read);
    if (Status s = Leftovers(RecycledProcessCount(files), ProcessesAllowed() + probes); !s.ok()) {
      co_return s;
    }
    co_return ParseCgroupFiles(files);
  }

  asio::awaitable<Result<std::string>> ProbeByExec() {
    Container probe;
    probe.api = shared_from_this();
    probe.ex = co_await asio::this_coro::executor;
    probe.id = id_;
    CaptureOptions stdout_only;
    stdout_only.output_cap = 4 * kMaxErrorText;
    stdout_only.stdout_only = true;
    const std::vector<std::string> cmd = {"/bin/sh", "-c", kRecycledProbeScript};
    auto r = co_await CaptureExec(probe, cmd, stdout_only);
    if (!r.ok()) co_return r.status();
    if (!r->read.ok() || !r->exit_code.ok() || *r->exit_code != std::optional<int>(0)) {
      co_return Status::Error("it failed");
    }
    co_return std::move(r->output);
  }

  // The agent's own check, made again from its cgroup: a process it cannot see or missed is in
  // the container's cgroup all the same.
  static Status Leftovers(int left, int allowed) {
    if (left < 0) return Status::Error("its processes cannot be counted");
    if (left > allowed) {
      return Status::Error(std::to_string(left) +
                           " processes are left in its cgroup after the agent's recycle");
    }
    return Status();
  }

  std::string id_;
  std::shared_ptr<ContainerApi> engine_;
  std::shared_ptr<AgentChannel> channel_;
  std::vector<std::string> env_;
  std::string cwd_;
  Recycling recycling_;
  // The client of the program it ran last: the only one it is recycled for (recycle_bin.h).
  std::optional<std::string> client_;
  uint32_t executions_ = 0;
  bool killed_ = false;
  bool host_looked_up_ = false;
  std::optional<HostCgroup> host_;
};

}  // namespace

std::shared_ptr<ContainerApi> MakeAgentContainer(std::string id,
                                                 std::shared_ptr<ContainerApi> engine,
                                                 std::shared_ptr<AgentChannel> channel,
                                                 std::vector<std::string> env, std::string cwd,
                                                 Recycling recycling) {
  return std::make_shared<AgentContainer>(std::move(id), std::move(engine), std::move(channel),
                                          std::move(env), std::move(cwd), std::move(recycling));
}

}  // namespace ci::container
