#include "docker/docker_executor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "container/agent_channel.h"
#include "container/agent_container.h"
#include "container/container_exec.h"
#include "container/exec_sandbox.h"
#include "container/recycle_bin.h"
#include "container/sandbox_shell.h"
#include "core/unix_time.h"
#include "docker/agent_attach.h"
#include "docker/engine_client.h"
#include "docker/engine_container.h"
#include "docker/image_watch.h"
#include "docker/reaper.h"

namespace ci::docker {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The agent is a static binary that only sets up a signalfd: it answers at once.
constexpr auto kAgentReadyTimeout = 10s;
// Recycled containers waiting at most, and the executions one container serves at most.
constexpr size_t kRecycleBinCapacity = 16;
constexpr uint32_t kMaxExecutions = 500;

class DockerExecutor final : public Executor {
 public:
  DockerExecutor(asio::any_io_executor ex, DockerExecutorOptions opts)
      : ex_(ex),
        opts_(std::move(opts)),
        client_(std::make_shared<EngineClient>(ex, opts_.endpoint, opts_.api_timeout)),
        reaper_(std::make_shared<ReaperState>()) {
    ImageWatchOptions io;
    io.image = opts_.image;
    io.period = opts_.image_check_period;
    io.pull_timeout = opts_.pull_timeout;
    io.pull_idle_timeout = opts_.pull_idle_timeout;
    image_ = std::make_shared<ImageWatch>(ex, client_, io);
    reaper_->client = client_;
    reaper_->owner = OwnerHere();
    reaper_->started_at = UnixSeconds();
  }

  std::string_view name() const override { return "docker"; }
  bool root_on_this_host() const override { return false; }
  bool runs_python_fork_server() const override { return true; }
  bool supports_sessions() const override { return true; }

  asio::awaitable<Result<std::unique_ptr<Sandbox>>> Prepare(const SandboxSpec& spec) override {
    // The first requests may come before the watchdog's first look, and whether the image has
    // the agent is known only once it was inspected.
    co_await image_->Known();
    // While the image is missing or being pulled, executions fail at once and say so.
    if (Status s = image_->Usable(); !s.ok()) co_return s;
    if (Status s = co_await EnsureConnected(); !s.ok()) co_return s;
    const bool session = spec.session_expires_at != 0;
    const std::string agent = AgentPath();
    ContainerOptions options = OptionsFor(spec, agent);
    // Execution containers of the agent are recycled: one of this configuration may be waiting.
    std::string recycle_key;
    if (!agent.empty() && !session && opts_.host_cgroups) {
      recycle_key = RecycleKey(spec, options);
      if (auto recycled = container::TakeRecycled(
              *recycled_, container::RecycleBinKey(recycle_key, spec.client), ex_)) {
        container::Container c =
            container::ContainerOfRecycled(std::move(*recycled), spec, ex_, UsesForkServer(spec));
        co_return co_await container::MakePrestartedExecSandbox(c, opts_.host_cgroups);
      }
    }
    std::string body = ContainerCreateJson(ContainerCreateFromSpec(spec, options));
    std::string name = "ci-exec-" + RandomHex(8);
    if (session) name = "ci-session-" + RandomHex(8);
    std::string path = "/containers/create?name=" + name;
    auto created = co_await client_->Request("POST", path, body);
    if (!created.ok()) co_return created.status();
    if (created->status == 404) {
      // No such image: gone since the watchdog last looked (docker rmi, an image prune).
      image_->Vanished();
      if (Status s = image_->Usable(); !s.ok()) co_return s;
    }
    if (created->status != 201) {
      co_return HttpError("creating the executor container (image " + opts_.image + ")", *created);
    }
    rapidjson::Document doc;
    if (!container::ParseObject(created->body, doc) || !doc.HasMember("Id") ||
        !doc["Id"].IsString()) {
      co_return Status::Error("docker container create: no Id in the answer");
    }
    EngineContainerInfo info{doc["Id"].GetString(),
                             std::to_string(spec.uid) + ":" + std::to_string(spec.gid),
                             spec.cwd,
                             spec.env,
                             spec.limits.pids,
                             opts_.host_cgroups};
    for (const auto& e : opts_.extra.env) info.env.push_back(e);
    container::Container c;
    c.api = MakeEngineContainer(ex_, client_, info, removals_);
    c.ex = ex_;
    c.id = info.id;
    c.cwd = spec.cwd;
    c.session = session;
    c.cpu_time_sec = spec.limits.cpu_time_sec;
    if (session) {
      c.call_token = RandomHex(32);
      if (c.call_token.empty()) co_return Status::Errno("getrandom", errno);
    }
    // The agent's stream is attached before the start, so nothing it says is missed.
    std::shared_ptr<container::AgentChannel> channel;
    Status failed;
    if (!agent.empty()) {
      std::string attach = "/containers/" + c.id + "/attach?stream=1&stdin=1&stdout=1&stderr=1";
      auto stream = co_await client_->Hijack(attach, "");
      if (stream.ok()) {
        channel = container::OpenAgentChannel(ex_, c.id,
                                              DockerAttachTransport(std::move(stream).value()));
        container::Recycling recycling;
        if (!recycle_key.empty()) {
          recycling = {recycled_, recycle_key, removals_, options.expires_at, kMaxExecutions};
        }
        c.api = container::MakeAgentContainer(c.id, c.api, channel, info.env, spec.cwd, recycling);
      } else {
        failed = stream.status().Context("attaching to the executor container's agent");
      }
    }
    auto sandbox = container::MakeExecSandbox(c, opts_.host_cgroups);
    auto t_created = std::chrono::steady_clock::now();
    if (failed.ok()) {
      std::string start = "/containers/" + c.id + "/start";
      auto started = co_await client_->Request("POST", start);
      if (!started.ok()) {
        failed = started.status();
      } else if (started->status != 204 && started->status != 304) {
        failed = HttpError("starting the executor container", *started);
      }
    }
    if (failed.ok() && channel) failed = co_await channel->AwaitReady(kAgentReadyTimeout);
    // A fork server pays off over the container's many executions: only where it is recycled.
    if (failed.ok() && channel && !recycle_key.empty() && UsesForkServer(spec)) {
      channel->StartZygote(spec.zygote_argv, info.env);
      c.zygote = true;
      sandbox =
          container::MakeExecSandbox(c, opts_.host_cgroups);  // (nothing ran in the first one)
    }
    // Execution sandboxes of the agent hold their program started ahead, as local ones do: its
    // exec is a frame, so the pool's refill pays for it, not the request.
    if (failed.ok() && channel && !session && !spec.prestart_argv.empty()) {
      c.prestart_argv = spec.prestart_argv;
      sandbox = co_await container::MakePrestartedExecSandbox(c, opts_.host_cgroups);
    }
    if (!failed.ok()) {
      co_await sandbox->Destroy();
      co_return failed;
    }
    spdlog::debug("docker {}: started in {} ms", c.short_id(),
                  (std::chrono::steady_clock::now() - t_created) / 1ms);
    co_return std::move(sandbox);
  }

  asio::awaitable<Status> Check() override {
    Status s = co_await client_->Negotiate();
    if (!s.ok()) co_return s;
    connected_ = true;
    // The daemon checks at startup and every HEALTH_CHECK_INTERVAL_SEC: the reaper rides on it
    // (first sweep at once, then at most every 60 s), detached so the check stays quick.
    if (!reaper_->running &&
        (!reaper_->first_done || Clock::now() - reaper_->last >= kReapPeriod)) {
      reaper_->last = Clock::now();
      asio::co_spawn(ex_, Reap(reaper_), asio::detached);
    }
    // The image: inspected at the first Check, then by its watchdog (every 60 s), which pulls it
    // when missing; this only reads its state (image_watch.h).
    Status image = co_await image_->Check();
    co_return image;
  }

  asio::awaitable<void> Drain() override {
    co_await container::CloseAndRemove(*recycled_);
    if (removals_->in_flight > 0) {
      spdlog::info("waiting for {} container removal(s)", removals_->in_flight);
    }
    while (removals_->in_flight > 0) co_await Sleep(10ms);
  }

  std::string network_isolation() const override {
    if (opts_.network == "none") return "none: docker NetworkMode none, loopback only";
    return "docker network " + opts_.network;
  }

  // Read from the ContainerCreate body that Prepare sends for this spec.
  Enforcement enforcement(const SandboxSpec& spec) const override {
    Enforcement e;
    const ContainerCreate body = ContainerCreateFromSpec(
        spec, OptionsFor(spec, spec.session_expires_at != 0 ? std::string() : AgentPath()));
    e.enforced = ContainerMeasures(body);
    if (!opts_.engine_applies_limits) MoveLimitsToDowngrades(e);
    if (body.seccomp_log_only) {
      e.downgrades.push_back(SeccompLogOnly(SeccompMeasure(body.seccomp_profile_name)));
    }
    // Every container's program is host uid 65532 (no user namespace per container), so the
    // counters the kernel keeps per uid are shared by all containers.
    e.downgrades.push_back(
        {MeasureName({MeasureKind::kOwnHostIds}),
         "every container runs as host uid 65532: per-user kernel counters (pipe buffer pages, "
         "inotify instances, queued signals, processes) are shared by all containers",
         "use the local backend as root for a host uid per sandbox"});
    if (opts_.network != "none") {
      e.downgrades.push_back(
          {"network isolation",
           "PYTHON_EXECUTOR_DOCKER_NETWORK=" + opts_.network + " gives sandboxes a network",
           "unset PYTHON_EXECUTOR_DOCKER_NETWORK"});
    }
    return e;
  }

 private:
  static void MoveLimitsToDowngrades(Enforcement& e) {
    std::vector<Measure> kept;
    for (const Measure& m : e.enforced) {
      if (m.kind != MeasureKind::kMemoryLimit && m.kind != MeasureKind::kPidsLimit &&
          m.kind != MeasureKind::kCpuCap) {
        kept.push_back(m);
        continue;
      }
      e.downgrades.push_back({MeasureName(m),
                              "the Docker Engine runs without cgroups (rootless on cgroup v1): it "
                              "accepts the limit and does not apply it",
                              "a rootless Engine on cgroup v2 with memory, pids and cpu delegated "
                              "to its user (systemd: Delegate=yes in user@.service)"});
    }
    e.enforced = std::move(kept);
  }

  // What makes two execution containers interchangeable: their create body but its expiry, and
  // the fork server the agent keeps in it.
  static std::string RecycleKey(const SandboxSpec& spec, ContainerOptions options) {
    options.expires_at = 0;
    std::string key = ContainerCreateJson(ContainerCreateFromSpec(spec, options));
    for (const std::string& arg : spec.zygote_argv) (key += '\0') += arg;
    return key;
  }

  bool UsesForkServer(const SandboxSpec& spec) const {
    return opts_.fork_server && !spec.zygote_argv.empty();
  }

  // The image's agent when containers are to run it (empty: `docker exec`s).
  std::string AgentPath() const { return opts_.agent ? image_->agent_path() : ""; }

  // The container's options for `spec` (Prepare's and enforcement()'s).
  ContainerOptions OptionsFor(const SandboxSpec& spec, const std::string& agent) const {
    ContainerOptions o;
    o.image = opts_.image;
    o.network = opts_.network;
    o.extra = opts_.extra;
    o.extra.labels[kOwnerLabel] = reaper_->owner;
    o.cmd = container::ContainerInitArgv(std::nullopt);  // PID 1 (sandbox_shell.h)
    o.expires_at = UnixSeconds() +
                   std::chrono::duration_cast<std::chrono::seconds>(opts_.container_ttl).count();
    if (spec.session_expires_at != 0) {
      // A session ends by itself at its expiry, daemon or not: PID 1 (a sleep, or the agent's
      // --expires-at) ends then, the container stops, the reaper or the daemon removes it.
      int64_t left = std::max<int64_t>(1, spec.session_expires_at - UnixSeconds());
      o.cmd = container::ContainerInitArgv(left);
      o.component = "session";
      o.expires_at = spec.session_expires_at;
      o.cpu_rlimit_per_run = true;
    }
    if (!agent.empty()) {
      o.agent = true;
      o.cmd = {agent};
      for (const char* dir : container::kAgentWipes) o.cmd.insert(o.cmd.end(), {"--wipe", dir});
      if (spec.session_expires_at != 0) {
        o.cmd.insert(o.cmd.end(), {"--expires-at", std::to_string(spec.session_expires_at)});
      }
    }
    return o;
  }

  asio::awaitable<Status> EnsureConnected() {
    if (connected_) co_return Status();
    Status s = co_await client_->Negotiate();
    if (s.ok()) connected_ = true;
    co_return s;
  }

  asio::any_io_executor ex_;
  DockerExecutorOptions opts_;
  std::shared_ptr<EngineClient> client_;
  bool connected_ = false;
  std::shared_ptr<ReaperState> reaper_;
  std::shared_ptr<container::Removals> removals_ = std::make_shared<container::Removals>();
  std::shared_ptr<container::RecycleBin> recycled_ =
      std::make_shared<container::RecycleBin>(kRecycleBinCapacity);
  std::shared_ptr<ImageWatch> image_;
};

}  // namespace

std::unique_ptr<Executor> MakeDockerExecutor(asio::any_io_executor ex, DockerExecutorOptions opts) {
  return std::make_unique<DockerExecutor>(std::move(ex), std::move(opts));
}

}  // namespace ci::docker
