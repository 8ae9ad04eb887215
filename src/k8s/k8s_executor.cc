#include "k8s/k8s_executor.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <cerrno>
#include <csignal>
#include <set>

#include "container/agent_container.h"
#include "container/exec_sandbox.h"
#include "container/recycle_bin.h"
#include "container/sandbox_shell.h"
#include "core/random.h"
#include "core/short_id.h"
#include "core/sleep.h"
#include "core/unix_time.h"
#include "k8s/access_review.h"
#include "k8s/api_client.h"
#include "k8s/attach_transport.h"
#include "k8s/exec_protocol.h"
#include "k8s/pod_container.h"
#include "k8s/pod_lifecycle.h"
#include "k8s/pod_spec.h"
#include "k8s/sandbox_claims.h"
#include "k8s/session_pods.h"
#include "k8s/shared_pool.h"

namespace ci::k8s {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// How long a deletion may take to be confirmed, and how often the reaper looks.
constexpr auto kDeleteConfirm = 30s;
constexpr int kDeleteAttempts = 3;
constexpr auto kReapPeriod = 60s;
// From the attach to the agent's answer to its hello.
constexpr auto kAgentReadyTimeout = 10s;
// Recycled execution pods waiting at most, and the executions one pod serves at most (as
// docker's containers).
constexpr size_t kRecycleBinCapacity = 16;
constexpr uint32_t kMaxExecutions = 500;
// A recycled pod holds its memory request on its node: one its client has not come back to
// within this is deleted (at a health check).
constexpr auto kRecycledMaxIdle = 120s;

// Pod deletions in flight, each pod once: Destroy and Kill both ask for it.
struct Removals {
  std::shared_ptr<ApiClient> client;
  std::set<std::string> in_flight;
};

// What a removal deletes, for the log: the pod, or the claim that holds it.
std::string What(const PodRef& pod) {
  return pod.claim.empty() ? "pod " + pod.name : "SandboxClaim " + pod.claim;
}

// Tried a few times: at shutdown there is no later reaper run of ours to catch a failure.
asio::awaitable<void> RemovePodNow(std::shared_ptr<Removals> r, PodRef pod) {
  Status s;
  for (int attempt = 1; attempt <= kDeleteAttempts; ++attempt) {
    if (pod.claim.empty()) {
      s = co_await DeletePod(*r->client, pod.namespace_, pod.name, kDeleteConfirm);
    } else {
      s = co_await DeleteSandboxClaim(*r->client, pod.namespace_, pod.claim, kDeleteConfirm);
    }
    if (s.ok()) break;
    spdlog::warn("deleting {} (attempt {} of {}): {}", What(pod), attempt, kDeleteAttempts,
                 s.message());
    if (attempt < kDeleteAttempts) co_await Sleep(1s);
  }
  r->in_flight.erase(pod.name);
  if (!s.ok()) spdlog::error("{} was not deleted; the reaper will retry", What(pod));
}

// SandboxClaims made by Prepares still in flight (the names, empty until the claim exists): each
// Entry lives in its Prepare's coroutine frame, so it leaves the set however the Prepare ends.
struct ClaimsInPrepare {
  std::set<const std::string*> claims;
  class Entry {
   public:
    Entry(std::shared_ptr<ClaimsInPrepare> set, const std::string* claim)
        : set_(std::move(set)), claim_(claim) {
      set_->claims.insert(claim_);
    }
    ~Entry() { set_->claims.erase(claim_); }
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;

   private:
    std::shared_ptr<ClaimsInPrepare> set_;
    const std::string* claim_;
  };
};

// Deletes `pod` in the background unless that is under way.
void StartRemoval(const std::shared_ptr<Removals>& r, const asio::any_io_executor& ex,
                  const PodRef& pod) {
  if (!r->in_flight.insert(pod.name).second) return;
  asio::co_spawn(ex, RemovePodNow(r, pod), asio::detached);
}

// Whether the daemon may attach to its pods' agents: asked at the first health check
// (SelfSubjectAccessReviews) and again each reaper period while refused; a real attach the API
// server declines with 403 refuses it too. Refused: execution pods run `sleep` as PID 1 and
// every step is an exec, as with KUBERNETES_EXECUTOR_AGENT=false.
enum class AttachAccess { kUnknown, kAllowed, kRefused };

struct ReaperState {
  bool running = false;
  bool first_done = false;
  Clock::time_point last;
};

class K8sExecutor final : public Executor {
 public:
  K8sExecutor(asio::any_io_executor ex, K8sExecutorOptions opts)
      : ex_(ex),
        opts_(std::move(opts)),
        client_(std::make_shared<ApiClient>(ex, opts_.connection, opts_.api_timeout)),
        instance_(InstanceId(opts_.pods)),
        started_at_(UnixSeconds()) {
    removals_->client = client_;
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    owner_description_ = opts_.pods.owner
                             ? "pod " + opts_.pods.owner->name
                             : "host " + std::string(host) + ", pid " + std::to_string(::getpid());
  }

  ~K8sExecutor() override {
    for (auto& p : shared_pools_) p.keeper->Stop();  // its loop calls back into this
  }

  std::string_view name() const override { return "kubernetes"; }
  bool root_on_this_host() const override { return false; }
  bool supports_sessions() const override { return true; }
  // Recycled execution pods keep one (AgentSandboxOn).
  bool runs_python_fork_server() const override {
    return opts_.pods.agent && !opts_.pods.agent_sandbox;
  }

  asio::awaitable<Result<std::unique_ptr<Sandbox>>> Prepare(const SandboxSpec& spec) override {
    const std::string& ns = opts_.pods.namespace_;
    if (spec.egress && opts_.pods.agent && attach_ == AttachAccess::kRefused) {
      co_return Status::Unavailable(
          "egress", "egress needs the pod's agent, reached over pods/attach, and " +
                        attach_refused_ + "; grant get and create on pods/attach in namespace " +
                        ns + " (packaging/kubernetes/role.yaml)");
    }
    PodOptions options = OptionsFor(spec);
    // Execution pods of the agent are recycled: one of this pod and client may be waiting.
    const std::string recycle_key = RecycleKey(spec, options);
    if (!recycle_key.empty()) {
      if (auto recycled = container::TakeRecycled(
              *recycled_, container::RecycleBinKey(recycle_key, spec.client), ex_)) {
        co_return co_await ServeRecycled(std::move(*recycled), spec);
      }
    }
    if (opts_.pods.agent_sandbox) co_return co_await PrepareClaimed(spec, std::move(options));
    if (SharedPoolKeeper* pool = SharedPoolOf(spec)) {
      auto claimed = co_await pool->Claim(instance_, owner_description_);
      if (!claimed.ok()) {
        spdlog::warn("{}; this execution's pod is made now", claimed.status().message());
      } else if (claimed->has_value()) {
        const PodRef pod{ns, **claimed, kExecutorContainer};
        const std::string from_a_get;
        co_return co_await Serve(pod, from_a_get, spec, options);
      }
    }
    if (options.kind == PodKind::kSession) {
      options.session_token = RandomHex(32);
      if (options.session_token.empty()) co_return Status::Errno("getrandom", errno);
    }
    const std::string body = PodJson(spec, options);
    auto created = co_await CreatePod(*client_, ns, body);
    if (!created.ok()) co_return StartFailure(created.status(), "kubernetes API");
    const PodRef pod{ns, created->name, kExecutorContainer};
    co_return co_await Serve(pod, created->resource_version, spec, options, recycle_key);
  }

  // KUBERNETES_SANDBOX_API=agent-sandbox: a sandbox of the pool of `spec`'s pod, claimed.
  asio::awaitable<Result<std::unique_ptr<Sandbox>>> PrepareClaimed(const SandboxSpec& spec,
                                                                   PodOptions options) {
    std::shared_ptr<SandboxPool> pool = SandboxPoolOf(spec);
    if (!pool->ensured) {
      Status ensured = co_await EnsurePool(pool);
      if (!ensured.ok()) co_return StartFailure(ensured, "agent-sandbox");
    }
    ClaimRequest request;
    request.pool = pool->name;
    request.instance_id = instance_;
    request.owner_description = owner_description_;
    request.shutdown_at = UnixSeconds() + opts_.pods.execution_pod_ttl.count();
    if (options.kind == PodKind::kSession) {
      // What its pod would carry, on the claim: the template's pods are every session's.
      options.session_token = RandomHex(32);
      if (options.session_token.empty()) co_return Status::Errno("getrandom", errno);
      const Pod labelled = PodFromSpec(spec, options);
      request.component = "session";
      request.shutdown_at = spec.session_expires_at;
      if (options.outlives_daemon) request.instance_id.clear();
      if (!spec.session.id.empty()) request.labels[kSessionLabel] = spec.session.id;
      for (const char* key :
           {kSessionCreatedAnnotation, kSessionExpiresAnnotation, kSessionClientAnnotation,
            kSessionTokenAnnotation, kOutlivesDaemonAnnotation}) {
        if (labelled.annotations.count(key))
          request.annotations[key] = labelled.annotations.at(key);
      }
    }
    const std::string body = SandboxClaimJson(request);
    // Until it is a sandbox's (whose removal deletes it), Drain deletes it: a replica stopped
    // while it claimed would leave it holding its sandbox until its shutdownTime.
    std::string claim;
    ClaimsInPrepare::Entry preparing(claims_in_prepare_, &claim);
    auto claimed = co_await ClaimSandbox(*client_, opts_.pods.namespace_, body, opts_.start_timeout,
                                         [&claim](const std::string& name) { claim = name; });
    if (!claimed.ok()) co_return StartFailure(claimed.status(), "sandbox claim");
    spdlog::debug("SandboxClaim {}: sandbox {}, pod {}", claimed->claim, claimed->sandbox,
                  claimed->pod);
    const PodRef pod{opts_.pods.namespace_, claimed->pod, kExecutorContainer, claimed->claim};
    const std::string from_a_get;
    co_return co_await Serve(pod, from_a_get, spec, options);
  }

  // Once `pod` (made for `spec` with `options`) runs, the sandbox in it; the pod is removed when
  // it does not start. `resource_version`: where the watch of it starts (empty: a GET).
  // `recycle_key`: a pod of this replica's own, recycled after its executions (RecycleKey).
  asio::awaitable<Result<std::unique_ptr<Sandbox>>> Serve(const PodRef& pod,
                                                          std::string resource_version,
                                                          const SandboxSpec& spec,
                                                          const PodOptions& options,
                                                          const std::string& recycle_key = {}) {
    const std::string& ns = pod.namespace_;
    auto t0 = Clock::now();
    Status running =
        co_await WaitRunning(*client_, ns, pod.name, resource_version, opts_.start_timeout);
    if (!running.ok()) {
      StartRemoval(removals_, ex_, pod);
      co_return StartFailure(running, "pod start");
    }
    spdlog::debug("pod {}: running in {} ms", pod.name, (Clock::now() - t0) / 1ms);
    if (options.agent) {
      auto agent = co_await AgentSandboxOn(pod, spec, options, recycle_key);
      // Refused just now: this request goes on in a pod driven by exec.
      if (!agent.ok() && attach_ == AttachAccess::kRefused) co_return co_await Prepare(spec);
      co_return agent;
    }
    last_start_failure_.clear();
    co_return SandboxOn(pod, spec, options.session_token);
  }

  asio::awaitable<Result<std::optional<FoundSession>>> FindSession(const SandboxSpec& spec,
                                                                   const std::string& id) override {
    if (!IsSessionLabelValue(id)) co_return std::nullopt;
    auto pods = co_await ListSessions(id);
    if (!pods.ok()) co_return pods.status();
    if (pods->empty()) co_return std::nullopt;
    SessionPod found = pods->front();
    if (!found.claim.empty()) {
      auto pod = co_await SandboxPodOf(*client_, opts_.pods.namespace_, found.name);
      if (!pod.ok()) co_return pod.status();
      found.name = *pod;
    }
    SandboxSpec session = spec;
    session.session = found.identity;
    session.session_expires_at = static_cast<int64_t>(found.identity.expires_at) + 1;
    spdlog::info("session {}: served here from pod {}", ShortId(id), found.name);
    const PodRef pod{opts_.pods.namespace_, found.name, kExecutorContainer, found.claim};
    co_return FoundSession{found.identity, SandboxOn(pod, session, found.token)};
  }

  // The cluster's sessions (one: `id`): pods, or claims with agent-sandbox.
  asio::awaitable<Result<std::vector<SessionPod>>> ListSessions(const std::string& id) {
    if (opts_.pods.agent_sandbox)
      co_return co_await ListSessionClaims(*client_, opts_.pods.namespace_, id);
    co_return co_await ListSessionPods(*client_, opts_.pods.namespace_, id);
  }

  asio::awaitable<Result<std::optional<std::vector<SessionIdentity>>>> ListSessions() override {
    const std::string all;
    auto pods = co_await ListSessions(all);
    if (!pods.ok()) co_return pods.status();
    std::vector<SessionIdentity> out;
    for (const auto& p : *pods) out.push_back(p.identity);
    co_return std::optional(std::move(out));
  }

  bool sessions_outlive_daemon() const override { return opts_.pods.sessions_outlive_daemon; }

  // Lists our pods (one): the API server answers, the credentials work and the Role grants
  // what the backend uses first. The reaper rides on it, as docker's does.
  asio::awaitable<Status> Check() override {
    const std::string path = "/api/v1/namespaces/" + opts_.pods.namespace_ +
                             "/pods?limit=1&labelSelector=app%3Dcode-interpreter";
    auto r = co_await client_->Request("GET", path, "");
    if (!r.ok()) {
      co_return r.status().Context("kubernetes API at " + opts_.connection.server.host + ":" +
                                   std::to_string(opts_.connection.server.port) + " (" +
                                   opts_.connection.origin + ")");
    }
    if (!r->ok()) {
      co_return ApiError("listing pods in namespace " + opts_.pods.namespace_ +
                             " (check the kubeconfig's credentials and the Role of "
                             "packaging/kubernetes/rbac.yaml)",
                         *r);
    }
    const bool review = !reviewing_ && (!reviewed_ || (attach_ == AttachAccess::kRefused &&
                                                       Clock::now() - reaper_.last >= kReapPeriod));
    if (!reaper_.running && (!reaper_.first_done || Clock::now() - reaper_.last >= kReapPeriod)) {
      reaper_.last = Clock::now();
      asio::co_spawn(ex_, Reap(), asio::detached);
    }
    container::RemoveIdle(*recycled_, kRecycledMaxIdle, ex_);
    if (review) co_await ReviewAccess();
    if (!exec_refused_.empty()) {
      co_return Status::Error("the daemon's credentials may not " + exec_refused_ +
                              " in namespace " + opts_.pods.namespace_ +
                              ": every session step needs it (and every execution step without "
                              "the agent); grant it as packaging/kubernetes/role.yaml does");
    }
    if (!last_start_failure_.empty()) {
      co_return Status::Error("the last executor pod did not start: " + last_start_failure_);
    }
    co_return Status();
  }

  asio::awaitable<void> Drain() override {
    co_await container::CloseAndRemove(*recycled_);
    while (recycles_->in_flight > 0) co_await Sleep(10ms);
    // The pool's pods stay: they are the deployment's, for the replicas that remain.
    for (auto& p : shared_pools_) p.keeper->Stop();
    for (auto& p : shared_pools_) {
      while (!p.keeper->stopped()) co_await Sleep(10ms);
    }
    for (const std::string* claim : claims_in_prepare_->claims) {
      if (claim->empty()) continue;
      const PodRef pod{opts_.pods.namespace_, *claim, kExecutorContainer, *claim};
      StartRemoval(removals_, ex_, pod);
    }
    if (!removals_->in_flight.empty()) {
      spdlog::info("waiting for {} pod deletion(s)", removals_->in_flight.size());
    }
    while (!removals_->in_flight.empty()) co_await Sleep(10ms);
  }

  std::string network_isolation() const override {
    if (opts_.pods.net_admin_lockdown) {
      return "none: the network-lockdown init container drops every packet but loopback";
    }
    return "NetworkPolicy: no ingress or egress for executor pods, where the CNI enforces it";
  }

  // Read from the Pod that Prepare sends for this spec.
  Enforcement enforcement(const SandboxSpec& spec) const override {
    const Pod pod = PodFromSpec(spec, OptionsFor(spec));
    return {PodMeasures(pod), PodDowngrades(pod)};
  }

  bool KeepSharedPool(const SandboxSpec& spec, size_t size) override {
    if (spec.session_expires_at != 0 || size == 0) return false;
    if (opts_.pods.agent_sandbox) {
      // A SandboxWarmPool; pools of the same pod are one, of their summed size.
      std::shared_ptr<SandboxPool> pool = SandboxPoolOf(spec);
      pool->size += size;
      pool->kept = true;
      if (!pool->ensure_started) {
        pool->ensure_started = true;
        asio::co_spawn(ex_, EnsureAtStart(pool), asio::detached);
      }
      return true;
    }
    if (!opts_.pods.shared_warm_pool) return false;
    SandboxSpec pooled = PoolSpec(spec);
    // Pools whose specs differ only in their program (python's, and bash's and the others')
    // are one pool of pods: of their summed size.
    for (auto& p : shared_pools_) {
      if (p.spec != pooled) continue;
      p.keeper->Grow(size);
      spdlog::info("kubernetes: shared warm pool {} grows to {} pod(s)", p.keeper->options().key,
                   p.keeper->options().size);
      return true;
    }
    const std::string key = PoolKey(PoolPodJson(pooled, 0, ""));
    SharedPoolKeeper::Options o;
    o.ns = opts_.pods.namespace_;
    o.key = key;
    o.size = size;
    o.period = opts_.shared_pool_period;
    auto keeper = std::make_shared<SharedPoolKeeper>(
        ex_, client_, o, [this, pooled, key](int64_t now) { return PoolPodJson(pooled, now, key); },
        // Without attach the pods would need another PID 1 than the key's: none are made.
        [this] { return attach_ == AttachAccess::kRefused; });
    keeper->Start();
    spdlog::info("kubernetes: shared warm pool {} of {} pod(s) in namespace {}, for every replica",
                 key, size, o.ns);
    shared_pools_.push_back({pooled, keeper});
    return true;
  }

  std::vector<BackendMetric> metrics() const override {
    std::vector<BackendMetric> out = {
        {"code_interpreter_recycled_pods", "gauge",
         "Execution pods put back by their agent, waiting for their client's next execution.",
         static_cast<double>(recycled_->size())}};
    if (shared_pools_.empty()) return out;
    SharedPoolStats sum;
    for (const auto& p : shared_pools_) {
      const SharedPoolStats& s = p.keeper->stats();
      sum.free += s.free;
      sum.claims += s.claims;
      sum.misses += s.misses;
      sum.conflicts += s.conflicts;
      sum.created += s.created;
      sum.create_failures += s.create_failures;
    }
    auto d = [](auto v) { return static_cast<double>(v); };
    out.insert(
        out.end(),
        {{"code_interpreter_shared_pool_free_pods", "gauge",
          "Unclaimed pods of the shared warm pools at this replica's last look.", d(sum.free)},
         {"code_interpreter_shared_pool_claims_total", "counter",
          "Executions of this replica served by a pod of a shared warm pool.", d(sum.claims)},
         {"code_interpreter_shared_pool_misses_total", "counter",
          "Executions of this replica that found no free pooled pod.", d(sum.misses)},
         {"code_interpreter_shared_pool_conflicts_total", "counter",
          "Claims of this replica that another replica won first.", d(sum.conflicts)},
         {"code_interpreter_shared_pool_pods_created_total", "counter",
          "Pods this replica added to the shared warm pools.", d(sum.created)},
         {"code_interpreter_shared_pool_create_failures_total", "counter",
          "Pool pods this replica failed to add.", d(sum.create_failures)}});
    return out;
  }

  std::vector<Downgrade> downgrades() const override {
    if (attach_ != AttachAccess::kRefused) return {};
    return {{"executions driven by the pod's agent over pods/attach (KUBERNETES_EXECUTOR_AGENT)",
             attach_refused_ +
                 ": each step of an execution is an exec into its pod instead "
                 "(a WebSocket each, slower), as with KUBERNETES_EXECUTOR_AGENT=false",
             "grant get and create on pods/attach in namespace " + opts_.pods.namespace_ +
                 " (packaging/kubernetes/role.yaml); the daemon asks again every minute"}};
  }

 private:
  PodOptions OptionsFor(const SandboxSpec& spec) const {
    PodRequest r;
    r.now = UnixSeconds();
    r.instance_id = instance_;
    r.owner_description = owner_description_;
    r.daemon_namespace = opts_.connection.Namespace();
    if (attach_ != AttachAccess::kRefused) return PodOptionsFor(opts_.pods, spec, r);
    K8sOptions without_agent = opts_.pods;
    without_agent.agent = false;
    return PodOptionsFor(without_agent, spec, r);
  }

  // What a shared pool's pods are made for, and what an execution's spec is compared with: the
  // program is started at the claim (the pod's agent serves whichever replica claims it).
  static SandboxSpec PoolSpec(const SandboxSpec& spec) {
    SandboxSpec pooled = spec;
    pooled.prestart_argv.clear();
    pooled.client.clear();
    return pooled;
  }

  // agent-sandbox: the template and warm pool of `spec`'s pod (made when first asked for).
  struct SandboxPool {
    std::string name;  // the template's and the pool's: from the pod's key
    std::string template_json;
    size_t size = 0;    // the warm pool's replicas
    bool kept = false;  // a warm pool of the daemon's (else of replicas 0: cold claims)
    bool ensure_started = false;
    bool ensured = false;  // both exist
  };

  // By the pod, not the spec: while pods/attach is refused a spec's pod is another (sleep as
  // PID 1, not the agent).
  std::shared_ptr<SandboxPool> SandboxPoolOf(const SandboxSpec& spec) {
    const SandboxSpec pooled = PoolSpec(spec);
    // The template's pods: no owner (any replica claims them) and no expiry or deadline (the
    // claim's shutdownTime ends them; a warm pool's wait is the controller's).
    PodOptions o = OptionsFor(pooled);
    o.owner.reset();
    o.instance_id.clear();
    o.owner_description = "agent-sandbox warm pool (KUBERNETES_SANDBOX_API)";
    o.expires_at = 0;
    o.active_deadline_sec = 0;
    if (o.kind == PodKind::kSession) {
      // Every session's pod: its identity is its claim's, its end the claim's shutdownTime.
      o.session = {};
      o.outlives_daemon = false;
      o.command = o.agent ? std::vector<std::string>{opts_.pods.agent_path}
                          : container::ContainerInitArgv(std::nullopt);
    }
    const std::string pod = PodJson(pooled, o);
    const std::string name = SandboxPoolName(PoolKey(pod));
    for (auto& p : sandbox_pools_) {
      if (p->name == name) return p;
    }
    auto p = std::make_shared<SandboxPool>();
    p->name = name;
    auto t = SandboxTemplateJson(p->name, pod);
    if (t.ok()) p->template_json = *t;
    sandbox_pools_.push_back(p);
    return p;
  }

  asio::awaitable<Status> EnsurePool(std::shared_ptr<SandboxPool> pool) {
    Status s = co_await EnsureSandboxPool(*client_, opts_.pods.namespace_, pool->name,
                                          pool->template_json, pool->size, pool->kept);
    if (s.ok() && !pool->ensured) {
      pool->ensured = true;
      spdlog::info(
          "kubernetes: SandboxTemplate and SandboxWarmPool {} of {} sandbox(es) in "
          "namespace {}",
          pool->name, pool->size, opts_.pods.namespace_);
    }
    co_return s;
  }

  asio::awaitable<void> EnsureAtStart(std::shared_ptr<SandboxPool> pool) {
    Status s = co_await EnsurePool(pool);
    if (s.ok()) co_return;
    spdlog::error("kubernetes: warm pool {}: {}; executions try again", pool->name, s.message());
    last_start_failure_ = s.message();
  }

  // The shared pool `spec` is served from, if any (none while pods/attach is refused: its pods'
  // PID 1 is the agent).
  SharedPoolKeeper* SharedPoolOf(const SandboxSpec& spec) {
    if (shared_pools_.empty() || attach_ == AttachAccess::kRefused) return nullptr;
    const SandboxSpec pooled = PoolSpec(spec);
    for (auto& p : shared_pools_) {
      if (p.spec == pooled) return p.keeper.get();
    }
    return nullptr;
  }

  // A shared pool's pod: the deployment's (no owner label or reference: no replica's reaper or
  // shutdown removes it) until a replica claims it, expiring from `now` (unix seconds); with
  // `now` 0 and no key, what the pool's key is the hash of.
  std::string PoolPodJson(const SandboxSpec& spec, int64_t now, const std::string& key) const {
    PodRequest r;
    r.now = now;
    r.owner_description = "shared warm pool (KUBERNETES_SHARED_WARM_POOL)";
    r.daemon_namespace = opts_.connection.Namespace();
    PodOptions o = PodOptionsFor(opts_.pods, spec, r);
    o.owner.reset();
    o.pool_key = key;
    return PodJson(spec, o);
  }

  // The access reviews (access_review.h): pods/exec refused is an error /health shows until it
  // is granted; pods/attach refused (when the agent is on) a downgrade. A review the API server
  // cannot make leaves it to the first real attach.
  asio::awaitable<void> ReviewAccess() {
    reviewing_ = true;
    const uint64_t attach_refusals = attach_refusals_;
    auto access = co_await ReviewPodStreams(*client_, opts_.pods.namespace_);
    reviewing_ = false;
    if (!access.ok()) {
      if (!reviewed_) {
        spdlog::info(
            "kubernetes: no access review ({}); the first attach to a pod tells whether "
            "pods/attach is allowed",
            access.status().message());
      }
      reviewed_ = true;
      co_return;
    }
    reviewed_ = true;
    const std::string& exec_refused = access->exec_refused;
    if (exec_refused != exec_refused_ && !exec_refused.empty()) {
      spdlog::error(
          "kubernetes: the daemon's credentials may not {} in namespace {}: sessions "
          "cannot run; grant it as packaging/kubernetes/role.yaml does",
          exec_refused, opts_.pods.namespace_);
    }
    exec_refused_ = exec_refused;
    // A real attach refused while the review was asked is the fresher answer.
    if (!opts_.pods.agent || attach_refusals != attach_refusals_) co_return;
    if (access->attach_refused.empty()) {
      if (attach_ == AttachAccess::kRefused) {
        spdlog::info("kubernetes: pods/attach is allowed now: execution pods run the agent again");
      }
      attach_ = AttachAccess::kAllowed;
    } else {
      RefuseAttach("the daemon's credentials may not " + access->attach_refused +
                   " (access review)");
    }
  }

  void RefuseAttach(const std::string& why) {
    if (attach_ != AttachAccess::kRefused) {
      spdlog::warn(
          "kubernetes: {}: execution pods run without the agent, each step an exec "
          "(slower); grant get and create on pods/attach in namespace {} "
          "(packaging/kubernetes/role.yaml)",
          why, opts_.pods.namespace_);
    }
    attach_ = AttachAccess::kRefused;
    attach_refused_ = why;
  }

  // No pod to run in is never the program's fault: the API answers 503 with the reason (as
  // docker's missing image), and until a pod starts again /health and /ready say why.
  Status StartFailure(const Status& why, const char* reason) {
    if (why.unavailable()) return why;
    last_start_failure_ = why.message();
    return Status::Unavailable(reason, why.message());
  }

  // The sandbox driving `pod` (made by Prepare, or another replica's session pod).
  std::unique_ptr<Sandbox> SandboxOn(const PodRef& pod, const SandboxSpec& spec,
                                     const std::string& session_token) {
    return container::MakeExecSandbox(ContainerOn(pod, spec, session_token), false);
  }

  // An execution pod whose PID 1 is the agent: its attach carries every step of the sandbox as
  // frames (container/agent_channel.h), and a pooled one holds its program started ahead, as
  // docker's agent containers do; with a `recycle_key` also a fork server.
  asio::awaitable<Result<std::unique_ptr<Sandbox>>> AgentSandboxOn(const PodRef& pod,
                                                                   const SandboxSpec& spec,
                                                                   const PodOptions& options,
                                                                   const std::string& recycle_key) {
    container::Container c = ContainerOn(pod, spec, options.session_token);
    const std::string target = AttachRequestTarget(pod.namespace_, pod.name, pod.container);
    int declined = 0;
    auto conn = co_await client_->Exec(target, &declined);
    if (declined == 403) {
      StartRemoval(removals_, ex_, pod);
      ++attach_refusals_;
      RefuseAttach("the API server refused to attach to pod " + pod.name + " (" +
                   conn.status().message() + ")");
      co_return conn.status();
    }
    Status failed = conn.status();
    std::shared_ptr<container::AgentChannel> channel;
    if (conn.ok()) {
      channel =
          container::OpenAgentChannel(ex_, pod.name, PodAttachTransport(std::move(conn).value()));
      failed = co_await channel->AwaitReady(kAgentReadyTimeout);
    }
    if (!failed.ok()) {
      if (channel) channel->Close();
      StartRemoval(removals_, ex_, pod);
      co_return StartFailure(
          failed.Context("the agent of pod " + pod.name + " (image " + opts_.pods.image +
                         ", KUBERNETES_EXECUTOR_AGENT_PATH " + opts_.pods.agent_path + ")"),
          "pod agent");
    }
    last_start_failure_.clear();
    container::Recycling recycling;
    if (!recycle_key.empty()) {
      recycling = {recycled_, recycle_key, recycles_, options.expires_at, kMaxExecutions, true};
      // A fork server pays off over the pod's many executions: only where it is recycled. The
      // runs' rlimits are its own, so its programs' (their CPU time their driver's: the server
      // lives on).
      if (!spec.zygote_argv.empty()) {
        channel->StartZygote(container::WithRunLimits(
                                 container::RunLimitsScript(spec.limits, false), spec.zygote_argv),
                             {});
        c.zygote = true;
      }
    }
    c.api = container::MakeAgentContainer(pod.name, c.api, channel, {}, spec.cwd, recycling);
    if (spec.prestart_argv.empty()) co_return container::MakeExecSandbox(std::move(c), false);
    c.prestart_argv = spec.prestart_argv;
    co_return co_await container::MakePrestartedExecSandbox(c, false);
  }

  // What makes two execution pods interchangeable: their pod but its expiry, and the fork server
  // the agent keeps in it; empty for pods that are not recycled (sessions, exec-driven pods,
  // claimed sandboxes).
  std::string RecycleKey(const SandboxSpec& spec, PodOptions options) const {
    if (options.kind != PodKind::kExecution || !options.agent || opts_.pods.agent_sandbox)
      return "";
    options.expires_at = 0;
    std::string key = PodJson(spec, options);
    for (const std::string& arg : spec.zygote_argv) (key += '\0') += arg;
    return key;
  }

  // A pod put back by its agent (AgentContainer's recycle) for this execution.
  asio::awaitable<Result<std::unique_ptr<Sandbox>>> ServeRecycled(container::RecycledContainer r,
                                                                  const SandboxSpec& spec) {
    container::Container c =
        container::ContainerOfRecycled(std::move(r), spec, ex_, !spec.zygote_argv.empty());
    c.run_limits = container::RunLimitsScript(spec.limits, true);  // no rlimits in a pod's API
    co_return co_await container::MakePrestartedExecSandbox(c, false);
  }

  // What the exec-driven sandbox drives: the pod, removed by the executor.
  container::Container ContainerOn(const PodRef& pod, const SandboxSpec& spec,
                                   const std::string& session_token) {
    container::Container c;
    c.api = MakePodContainer(client_, pod, memo_, [r = removals_, ex = ex_](const PodRef& p) {
      StartRemoval(r, ex, p);
    });
    c.ex = ex_;
    c.id = pod.name;
    c.cwd = spec.cwd;
    c.session = spec.session_expires_at != 0;
    c.cpu_time_sec = spec.limits.cpu_time_sec;
    // No rlimits in the Pod API: each run's wrapper sets them (a session's CPU time per run).
    c.run_limits = container::RunLimitsScript(spec.limits, !c.session);
    c.call_token = session_token;
    return c;
  }

  asio::awaitable<void> Reap() {
    reaper_.running = true;
    ReapRequest req{instance_, started_at_, UnixSeconds(), OwnerGoneHere};
    ReapResult result = co_await ReapPods(*client_, opts_.pods.namespace_, req);
    for (const auto& d : result.deleted)
      spdlog::info("reaper: deleted pod {} ({})", d.name, d.reason);
    for (const auto& e : result.errors) spdlog::warn("reaper: {}", e);
    if (opts_.pods.agent_sandbox) {
      ReapResult claims = co_await ReapClaims(*client_, opts_.pods.namespace_, req);
      for (const auto& d : claims.deleted)
        spdlog::info("reaper: deleted SandboxClaim {} ({})", d.name, d.reason);
      for (const auto& e : claims.errors) spdlog::warn("reaper: {}", e);
    }
    reaper_.first_done = true;
    reaper_.running = false;
  }

  asio::any_io_executor ex_;
  K8sExecutorOptions opts_;
  std::shared_ptr<ApiClient> client_;
  std::string instance_;
  std::string owner_description_;
  int64_t started_at_;
  std::shared_ptr<ExecProtocolMemo> memo_ = std::make_shared<ExecProtocolMemo>();
  std::shared_ptr<Removals> removals_ = std::make_shared<Removals>();
  std::shared_ptr<ClaimsInPrepare> claims_in_prepare_ = std::make_shared<ClaimsInPrepare>();
  ReaperState reaper_;
  struct SharedPool {
    SandboxSpec spec;  // PoolSpec
    std::shared_ptr<SharedPoolKeeper> keeper;
  };
  std::vector<SharedPool> shared_pools_;
  std::vector<std::shared_ptr<SandboxPool>> sandbox_pools_;
  std::shared_ptr<container::RecycleBin> recycled_ =
      std::make_shared<container::RecycleBin>(kRecycleBinCapacity);
  std::shared_ptr<container::Removals> recycles_ = std::make_shared<container::Removals>();
  bool reviewed_ = false;
  bool reviewing_ = false;        // one access review at a time
  uint64_t attach_refusals_ = 0;  // real attaches answered 403
  AttachAccess attach_ = AttachAccess::kUnknown;
  std::string attach_refused_;      // why, while kRefused
  std::string exec_refused_;        // "get pods/exec or create pods/exec" the Role lacks
  std::string last_start_failure_;  // the last Prepare's, until one succeeds
};

}  // namespace

std::string InstanceId(const K8sOptions& pods) {
  return pods.owner ? LabelValue(pods.owner->name)
                    : HostInstancePrefix() + std::to_string(::getpid());
}

std::string HostInstancePrefix() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return LabelValue(std::string(host) + "-").substr(0, 50);
}

bool OwnerGoneHere(std::string_view owner) {
  const std::string prefix = HostInstancePrefix();
  if (owner.size() <= prefix.size() || owner.substr(0, prefix.size()) != prefix) return false;
  const std::string_view digits = owner.substr(prefix.size());
  if (digits.find_first_not_of("0123456789") != std::string_view::npos || digits.size() > 9) {
    return false;
  }
  const pid_t pid = static_cast<pid_t>(std::stol(std::string(digits)));
  return pid > 0 && pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH;
}

std::string LabelValue(std::string id) {
  for (char& ch : id) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') {
      ch = '-';
    }
  }
  if (id.size() > 63) id.resize(63);
  while (!id.empty() && !std::isalnum(static_cast<unsigned char>(id.front()))) id.erase(0, 1);
  return id;
}

std::unique_ptr<Executor> MakeK8sExecutor(asio::any_io_executor ex, K8sExecutorOptions opts) {
  return std::make_unique<K8sExecutor>(std::move(ex), std::move(opts));
}

}  // namespace ci::k8s
