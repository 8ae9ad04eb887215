#include "k8s/pod_spec.h"

#include <time.h>

#include <algorithm>

#include "container/agent_container.h"
#include "container/sandbox_shell.h"
#include "core/json.h"
#include "core/rfc3339.h"

namespace ci::k8s {
namespace {

// The agent as PID 1, with the places it empties when the pod is recycled (agent_container.h).
std::vector<std::string> AgentCommand(const std::string& agent_path) {
  std::vector<std::string> command = {agent_path};
  for (const char* dir : container::kAgentWipes) command.insert(command.end(), {"--wipe", dir});
  return command;
}

const char* ComponentOf(PodKind kind) {
  switch (kind) {
    case PodKind::kSession:
      return "session";
    case PodKind::kExecution:
      break;
  }
  return "executor";  // docker's label value for executions
}

const char* KindName(PodKind kind) {
  return kind == PodKind::kExecution ? "execution" : ComponentOf(kind);
}

const char* GenerateNameOf(PodKind kind) {
  switch (kind) {
    case PodKind::kSession:
      return "ci-session-";
    case PodKind::kExecution:
      break;
  }
  return "ci-exec-";
}

void WriteMap(JsonWriter& w, const char* key, const std::map<std::string, std::string>& m) {
  w.Key(key);
  w.StartObject();
  for (const auto& [k, v] : m) {
    WriteString(w, k);
    WriteString(w, v);
  }
  w.EndObject();
}

// requests = limits, so the pod is in the Guaranteed QoS class when both are set (no swap under
// the kubelet's LimitedSwap, last to be evicted).
void WriteResources(JsonWriter& w, const std::string& memory, const std::string& cpu) {
  json::FieldWriter v(w);
  w.Key("resources");
  w.StartObject();
  for (const char* which : {"limits", "requests"}) {
    w.Key(which);
    w.StartObject();
    if (!cpu.empty()) v("cpu", cpu);
    v("memory", memory);
    w.EndObject();
  }
  w.EndObject();
}

// A container's securityContext: no privilege escalation, every capability dropped. Only the
// lockdown init container is root and gets NET_ADMIN back.
void WriteContainerSecurity(JsonWriter& w, bool read_only_root, bool as_root_with_net_admin) {
  json::FieldWriter v(w);
  w.Key("securityContext");
  w.StartObject();
  if (as_root_with_net_admin) {
    v("runAsUser", 0);
    v("runAsNonRoot", false);
  }
  v("allowPrivilegeEscalation", false);
  v("privileged", false);
  v("readOnlyRootFilesystem", read_only_root);
  w.Key("capabilities");
  w.StartObject();
  v("drop", std::vector<std::string>{"ALL"});
  if (as_root_with_net_admin) v("add", std::vector<std::string>{"NET_ADMIN"});
  w.EndObject();
  w.EndObject();
}

// The lockdown init container: root with NET_ADMIN only, for the few milliseconds iptables needs;
// the program's container never has either. /run is its own small tmpfs (iptables' lock file,
// the root being read-only).
void WriteLockdownContainer(JsonWriter& w, const Pod& p) {
  json::FieldWriter v(w);
  w.StartObject();
  v("name", kLockdownContainer);
  v("image", p.lockdown_image);
  v("imagePullPolicy", p.image_pull_policy);
  v("command", std::vector<std::string>{"/bin/sh", "-c", kLockdownScript});
  WriteContainerSecurity(w, /*read_only_root=*/true, /*as_root_with_net_admin=*/true);
  WriteResources(w, "32Mi", "100m");
  w.Key("volumeMounts");
  w.StartArray();
  w.StartObject();
  v("name", "lockdown-run");
  v("mountPath", "/run");
  w.EndObject();
  w.EndArray();
  w.EndObject();
}

void WriteExecutorContainer(JsonWriter& w, const Pod& p) {
  json::FieldWriter v(w);
  w.StartObject();
  v("name", kExecutorContainer);
  v("image", p.image);
  v("imagePullPolicy", p.image_pull_policy);
  v("command", p.command);
  v("workingDir", p.working_dir);
  w.Key("env");
  w.StartArray();
  for (const auto& [name, value] : p.env) {
    w.StartObject();
    v("name", name);
    v("value", value);
    w.EndObject();
  }
  w.EndArray();
  // The program's stdin and output travel over execs, or over the agent's frames on its own
  // stdin and stdout (the pod's attach); the container has no terminal.
  v("stdin", p.stdin);
  v("tty", false);
  WriteContainerSecurity(w, p.read_only_root, /*as_root_with_net_admin=*/false);
  std::string cpu = p.resources.cpu_millicores > 0
                        ? std::to_string(p.resources.cpu_millicores) + "m"
                        : std::string();
  WriteResources(w, BytesQuantity(p.resources.memory_limit), cpu);
  w.Key("volumeMounts");
  w.StartArray();
  for (const char* name : {"workspace", "tmp"}) {
    w.StartObject();
    v("name", name);
    v("mountPath", std::string("/") + name);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

// A tmpfs: medium Memory, its pages charged to the pod's memory limit.
void WriteMemoryVolume(JsonWriter& w, const char* name, uint64_t bytes) {
  json::FieldWriter v(w);
  w.StartObject();
  v("name", name);
  w.Key("emptyDir");
  w.StartObject();
  v("medium", "Memory");
  v("sizeLimit", BytesQuantity(bytes));
  w.EndObject();
  w.EndObject();
}

}  // namespace

// Loopback keeps working (as the local runtime's and docker's network "none"); nothing else goes
// in or out. ip6tables only where the namespace has IPv6 (/proc/net is the pod's own).
const char* const kLockdownScript =
    "set -e; iptables -A INPUT ! -i lo -j DROP; iptables -A OUTPUT ! -o lo -j DROP; "
    "if [ -e /proc/net/if_inet6 ]; then ip6tables -A INPUT ! -i lo -j DROP; "
    "ip6tables -A OUTPUT ! -o lo -j DROP; fi";

std::string BytesQuantity(uint64_t bytes) {
  const std::pair<uint64_t, const char*> units[] = {
      {1ull << 40, "Ti"}, {1ull << 30, "Gi"}, {1ull << 20, "Mi"}, {1ull << 10, "Ki"}};
  for (const auto& [size, suffix] : units) {
    if (bytes != 0 && bytes % size == 0) return std::to_string(bytes / size) + suffix;
  }
  return std::to_string(bytes);
}

std::string UnixSecondsText(double unix_seconds) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.17g", unix_seconds);  // exact: replicas report the same times
  return buf;
}

PodOptions PodOptionsFor(const K8sOptions& o, const SandboxSpec& spec, const PodRequest& r) {
  PodOptions p;
  p.image = o.image;
  if (o.net_admin_lockdown)
    p.lockdown_image = o.lockdown_image.empty() ? o.image : o.lockdown_image;
  p.service_account = o.service_account;
  p.overrides = o.pod;
  p.instance_id = r.instance_id;
  p.owner_description = r.owner_description;
  if (o.owner) {
    const std::string& owner_ns =
        o.owner->namespace_.empty() ? r.daemon_namespace : o.owner->namespace_;
    if (owner_ns == o.namespace_) p.owner = o.owner;
  }
  if (spec.session_expires_at != 0) {
    // The session ends by itself at its expiry, daemon or not: the kubelet's deadline, and PID 1
    // sleeping until then (as docker's session container).
    int64_t left = std::max<int64_t>(1, spec.session_expires_at - r.now);
    p.kind = PodKind::kSession;
    p.session = spec.session;
    // Its daemon's pod going (a rolling update) must not take the session with it.
    p.outlives_daemon = o.sessions_outlive_daemon;
    if (p.outlives_daemon) p.owner.reset();
    p.expires_at = spec.session_expires_at;
    p.active_deadline_sec = left;
    p.command = container::ContainerInitArgv(left);
    // The agent drives it as it does an execution pod: each call's steps are frames on its attach
    // (another replica serving the session drives it by exec), its end at the expiry its own.
    if (o.agent) {
      p.command = AgentCommand(o.agent_path);
      p.command.insert(p.command.end(), {"--expires-at", std::to_string(spec.session_expires_at)});
      p.agent = true;
    }
  } else {
    // Made before its request is known (a warm pool's): the TTL bounds the wait and the run.
    p.kind = PodKind::kExecution;
    p.active_deadline_sec = o.execution_pod_ttl.count();
    p.expires_at = r.now + p.active_deadline_sec;
    p.command = container::ContainerInitArgv(std::nullopt);
    if (o.agent) {
      p.command = AgentCommand(o.agent_path);
      p.agent = true;
    }
  }
  return p;
}

Pod PodFromSpec(const SandboxSpec& spec, const PodOptions& o) {
  Pod p;
  if (o.name.empty()) p.generate_name = GenerateNameOf(o.kind);
  p.name = o.name;
  p.labels[kAppLabel] = kAppValue;
  p.labels[kComponentLabel] = ComponentOf(o.kind);
  // None: a sandbox's pod (sandbox_claims.h), whose claim's shutdownTime ends it.
  if (o.expires_at != 0) p.labels[kExpiresLabel] = std::to_string(o.expires_at);
  if (!o.instance_id.empty()) p.labels[kOwnerLabel] = o.instance_id;
  if (!o.owner_description.empty()) p.annotations[kOwnerAnnotation] = o.owner_description;
  p.annotations[kKindAnnotation] = KindName(o.kind);
  if (o.expires_at != 0) p.annotations[kExpiresAnnotation] = Rfc3339(o.expires_at);
  if (!o.session.id.empty()) {
    p.labels[kSessionLabel] = o.session.id;
    p.annotations[kSessionCreatedAnnotation] = UnixSecondsText(o.session.created_at);
    p.annotations[kSessionExpiresAnnotation] = UnixSecondsText(o.session.expires_at);
    if (!o.session.client.empty()) p.annotations[kSessionClientAnnotation] = o.session.client;
  }
  if (!o.session_token.empty()) p.annotations[kSessionTokenAnnotation] = o.session_token;
  if (!o.pool_key.empty()) p.labels[kPoolLabel] = o.pool_key;
  if (o.outlives_daemon) p.annotations[kOutlivesDaemonAnnotation] = "true";
  p.owner = o.owner;
  p.active_deadline_sec = o.active_deadline_sec;
  p.service_account = o.service_account;
  // spec.hostname must be a DNS label for the API server; any other leaves the pod's name.
  if (IsDnsLabel(spec.hostname)) p.hostname = spec.hostname;
  p.node_selector = o.overrides.node_selector;
  p.tolerations = o.overrides.tolerations;
  p.runtime_class = o.overrides.runtime_class;
  p.priority_class = o.overrides.priority_class;
  p.image_pull_secrets = o.overrides.image_pull_secrets;
  p.run_as_user = spec.uid;
  p.run_as_group = spec.gid;
  p.fs_group = spec.gid;  // the emptyDirs are group-owned by it, writable by the program
  if (o.overrides.seccomp_localhost_profile.empty()) {
    p.seccomp_type = "RuntimeDefault";
  } else {
    p.seccomp_type = "Localhost";
    p.seccomp_localhost_profile = o.overrides.seccomp_localhost_profile;
  }
  p.image = o.image;
  p.image_pull_policy = o.overrides.image_pull_policy;
  p.command = o.command;
  p.stdin = o.agent;
  p.working_dir = spec.cwd;
  for (const std::string& kv : spec.env) {
    size_t eq = kv.find('=');  // Validate(spec) guarantees one
    p.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  p.read_only_root = spec.security.read_only_root;
  p.resources.memory_limit = spec.limits.memory_bytes;
  p.resources.cpu_millicores = spec.limits.cpu_percent * 10;  // 100% = one core = 1000m
  p.limits = spec.limits;
  p.lockdown_image = o.lockdown_image;
  p.seccomp_profile_name = spec.security.seccomp_profile_name;
  p.spec_has_seccomp = !spec.security.seccomp_profile_json.empty();
  return p;
}

std::string PodJson(const Pod& p) {
  return JsonText([&](JsonWriter& w) {
    json::FieldWriter v(w);
    w.StartObject();
    v("apiVersion", "v1");
    v("kind", "Pod");
    w.Key("metadata");
    w.StartObject();
    if (!p.name.empty()) v("name", p.name);
    if (!p.generate_name.empty()) v("generateName", p.generate_name);
    WriteMap(w, "labels", p.labels);
    WriteMap(w, "annotations", p.annotations);
    if (p.owner) {
      // Not the controller, and not blocking the owner's deletion (that needs update on its
      // finalizers, which the daemon's Role does not grant).
      w.Key("ownerReferences");
      w.StartArray();
      w.StartObject();
      v("apiVersion", "v1");
      v("kind", "Pod");
      v("name", p.owner->name);
      v("uid", p.owner->uid);
      v("controller", false);
      v("blockOwnerDeletion", false);
      w.EndObject();
      w.EndArray();
    }
    w.EndObject();

    w.Key("spec");
    w.StartObject();
    v("restartPolicy", "Never");
    if (p.active_deadline_sec > 0) v("activeDeadlineSeconds", p.active_deadline_sec);
    v("terminationGracePeriodSeconds", 0);
    // No API credentials and no *_SERVICE_HOST variables of every Service in the sandbox.
    v("automountServiceAccountToken", false);
    v("enableServiceLinks", false);
    v("hostNetwork", false);
    v("hostPID", false);
    v("hostIPC", false);
    v("shareProcessNamespace", false);
    if (!p.service_account.empty()) v("serviceAccountName", p.service_account);
    if (!p.hostname.empty()) v("hostname", p.hostname);
    if (!p.node_selector.empty()) WriteMap(w, "nodeSelector", p.node_selector);
    if (!p.tolerations.empty()) {
      w.Key("tolerations");
      w.StartArray();
      for (const Toleration& t : p.tolerations) {
        w.StartObject();
        v("key", t.key);
        v("operator", t.op);
        if (t.op == "Equal") v("value", t.value);
        if (!t.effect.empty()) v("effect", t.effect);
        w.EndObject();
      }
      w.EndArray();
    }
    if (!p.runtime_class.empty()) v("runtimeClassName", p.runtime_class);
    if (!p.priority_class.empty()) v("priorityClassName", p.priority_class);
    if (!p.image_pull_secrets.empty()) {
      w.Key("imagePullSecrets");
      w.StartArray();
      for (const std::string& name : p.image_pull_secrets) {
        w.StartObject();
        v("name", name);
        w.EndObject();
      }
      w.EndArray();
    }
    w.Key("securityContext");
    w.StartObject();
    v("runAsNonRoot", true);
    v("runAsUser", p.run_as_user);
    v("runAsGroup", p.run_as_group);
    v("fsGroup", p.fs_group);
    w.Key("seccompProfile");
    w.StartObject();
    v("type", p.seccomp_type);
    if (!p.seccomp_localhost_profile.empty()) v("localhostProfile", p.seccomp_localhost_profile);
    w.EndObject();
    w.EndObject();
    if (!p.lockdown_image.empty()) {
      w.Key("initContainers");
      w.StartArray();
      WriteLockdownContainer(w, p);
      w.EndArray();
    }
    w.Key("containers");
    w.StartArray();
    WriteExecutorContainer(w, p);
    w.EndArray();
    w.Key("volumes");
    w.StartArray();
    WriteMemoryVolume(w, "workspace", p.limits.workspace_bytes);
    WriteMemoryVolume(w, "tmp", p.limits.tmp_bytes);
    if (!p.lockdown_image.empty()) WriteMemoryVolume(w, "lockdown-run", 1ull << 20);
    w.EndArray();
    w.EndObject();
    w.EndObject();
  });
}

std::string PodJson(const SandboxSpec& spec, const PodOptions& options) {
  return PodJson(PodFromSpec(spec, options));
}

std::vector<Measure> PodMeasures(const Pod& p) {
  using K = MeasureKind;
  // Every container has its own pid and mount namespace (no hostPID, no shared process
  // namespace); a user namespace only with hostUsers: false, which is not set.
  std::vector<Measure> m = {{K::kPidNamespace, 0, "kubernetes"},
                            {K::kMountNamespace, 0, "kubernetes"}};
  if (!p.lockdown_image.empty()) {
    m.push_back({K::kNetworkNamespace, 0, "loopback only, iptables of the network-lockdown init"});
  }
  m.push_back({K::kNoCapabilities, 0, "kubernetes capabilities drop ALL"});
  if (p.read_only_root) m.push_back({K::kReadOnlyRoot, 0, "kubernetes readOnlyRootFilesystem"});
  m.push_back({K::kNoNewPrivs, 0, "kubernetes allowPrivilegeEscalation false"});
  // The filter in force is the node's: the runtime's default, or the Localhost file as installed.
  m.push_back(p.seccomp_type == "Localhost"
                  ? Measure{K::kSeccomp, 0, "Localhost " + p.seccomp_localhost_profile + " profile"}
                  : Measure{K::kSeccomp, 0, "RuntimeDefault profile"});
  if (p.resources.memory_limit > 0) {
    // With CPU as well, requests = limits make the Guaranteed QoS class: no swap even where the
    // kubelet allows swap (LimitedSwap); otherwise the node's swap setting decides.
    m.push_back(
        {K::kMemoryLimit, p.resources.memory_limit,
         p.resources.cpu_millicores > 0 ? "kubernetes, Guaranteed QoS, no swap" : "kubernetes"});
  }
  if (p.resources.cpu_millicores > 0) {
    m.push_back({K::kCpuCap, p.resources.cpu_millicores / 10, "kubernetes limits.cpu"});
  }
  m.push_back({K::kNoTerminal, 0, "kubernetes, no tty"});
  // No rlimits in the Pod API: the run's wrapper lowers its own (container/sandbox_shell.h).
  const char* per_run = "ulimit in the run's wrapper";
  m.push_back({K::kCpuTime, p.limits.cpu_time_sec, "RLIMIT_CPU, ulimit in the run's wrapper"});
  m.push_back({K::kOpenFilesLimit, p.limits.open_files, per_run});
  m.push_back({K::kQueuedSignalsLimit, p.limits.queued_signals, per_run});
  m.push_back({K::kMessageQueueLimit, p.limits.message_queue_bytes, per_run});
  m.push_back({K::kLockedMemoryLimit, p.limits.locked_memory_bytes, per_run});
  return m;
}

std::vector<Downgrade> PodDowngrades(const Pod& p) {
  std::vector<Downgrade> d;
  d.push_back({MeasureName({MeasureKind::kPidsLimit, p.limits.pids}),
               "a pod has no pids limit of its own: only the kubelet's podPidsLimit (node "
               "configuration) bounds the processes of a pod",
               "set podPidsLimit in the KubeletConfiguration of the executor nodes"});
  if (p.lockdown_image.empty()) {
    d.push_back({"network isolation",
                 "executor pods are on the pod network: only a deny-all NetworkPolicy isolates "
                 "them, and only with a CNI that enforces NetworkPolicy (which the daemon cannot "
                 "see)",
                 "apply the NetworkPolicy of packaging/kubernetes on a CNI that enforces it, or "
                 "set KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN=true"});
  } else {
    d.push_back({"restricted Pod Security Standard",
                 "KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN=true adds an init container running as "
                 "root with NET_ADMIN (the program's container stays restricted); a namespace "
                 "enforcing restricted refuses the pods",
                 "set KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN=false and rely on the NetworkPolicy "
                 "of packaging/kubernetes with a CNI that enforces it"});
  }
  // procMount Default: the runtime's masked paths (kcore, keys, timer_list, sched_debug, acpi,
  // scsi...), not the longer list of core/proc_masks.h; a pod cannot add any.
  d.push_back({kProcMasksDowngrade,
               "a pod's /proc hides only the container runtime's masked paths: kallsyms, "
               "config.gz, modules and boot_id stay readable",
               "run executor pods under a sandboxed runtime (KUBERNETES_EXECUTOR_RUNTIME_CLASS, "
               "gVisor or Kata), whose /proc is not the host's"});
  d.push_back({MeasureName({MeasureKind::kOwnHostIds}),
               std::string("every pod runs as uid ") + std::to_string(p.run_as_user) +
                   " on its node (no user namespace per pod): per-user kernel counters (pipe "
                   "buffer pages, inotify instances, queued signals, processes) are shared by "
                   "the pods of a node",
               "use the local backend as root for a host uid per sandbox"});
  if (p.spec_has_seccomp && p.seccomp_type != "Localhost") {
    d.push_back({MeasureName(SeccompMeasure(p.seccomp_profile_name)),
                 "seccompProfile RuntimeDefault is the container runtime's default filter, not "
                 "the executor profile of policies/",
                 "install the profile on the nodes under the kubelet's seccomp directory and set "
                 "KUBERNETES_EXECUTOR_SECCOMP_PROFILE to its path there"});
  }
  return d;
}

}  // namespace ci::k8s
