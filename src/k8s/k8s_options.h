// The Kubernetes backend's options and their reading from the environment: the onyx variables
// (KUBERNETES_EXECUTOR_NAMESPACE, _IMAGE, _SERVICE_ACCOUNT, _NET_ADMIN_LOCKDOWN) and ours for
// the executor pods (README.md "Options"). How the API server is reached (in-cluster config or a
// kubeconfig) is not read here.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env_reader.h"
#include "core/status.h"

namespace ci::k8s {

// A pod toleration (core/v1 Toleration). `op` is "Exists" (no value) or "Equal"; an empty
// `effect` tolerates every effect.
struct Toleration {
  std::string key;
  std::string op = "Exists";
  std::string value;
  std::string effect;  // "", NoSchedule, PreferNoSchedule, NoExecute
  bool operator==(const Toleration&) const = default;
};

// What our own variables add to every executor pod.
struct PodOverrides {
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
  std::string runtime_class;   // runtimeClassName (gVisor, Kata); empty: the cluster's default
  std::string priority_class;  // priorityClassName
  std::vector<std::string> image_pull_secrets;
  std::string image_pull_policy = "IfNotPresent";  // IfNotPresent, Always, Never
  // seccompProfile Localhost with this localhostProfile (relative to the kubelet's seccomp
  // directory, installed on the nodes beforehand); empty: RuntimeDefault.
  std::string seccomp_localhost_profile;
  bool operator==(const PodOverrides&) const = default;
};

// The daemon's own pod (downward API POD_NAME, POD_UID, POD_NAMESPACE), the owner of the pods
// it creates in its own namespace.
struct OwnerPod {
  std::string name;
  std::string uid;
  std::string namespace_;  // empty: not given (the connection's namespace decides)
  bool operator==(const OwnerPod&) const = default;
};

struct K8sOptions {
  std::string namespace_ = "default";                      // KUBERNETES_EXECUTOR_NAMESPACE
  std::string image = "code-interpreter-executor:latest";  // KUBERNETES_EXECUTOR_IMAGE
  std::string service_account;  // KUBERNETES_EXECUTOR_SERVICE_ACCOUNT; empty: none named
  // KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN (onyx: true unless false/0/no): an init container
  // with NET_ADMIN drops every packet but loopback before the executor starts, so the pod is
  // isolated even before (or without) the CNI enforcing a NetworkPolicy.
  bool net_admin_lockdown = true;
  std::string lockdown_image;  // KUBERNETES_EXECUTOR_LOCKDOWN_IMAGE; empty: `image` (iptables)
  PodOverrides pod;
  std::optional<OwnerPod> owner;
  // How long an execution pod may live, a warm pool's wait included (activeDeadlineSeconds and
  // its expiry label): a backstop for a daemon that died before deleting it.
  std::chrono::seconds execution_pod_ttl{3600};
  // KUBERNETES_SESSIONS_OUTLIVE_DAEMON (default true): a session's pod is found by label by any
  // replica and lives to its TTL, whatever happens to the replica that created it (no
  // ownerReference, left alone at shutdown and by the reaper). false: sessions end with their
  // daemon, as on the other backends.
  bool sessions_outlive_daemon = true;
  // KUBERNETES_EXECUTOR_AGENT (default true): an execution pod's PID 1 is the executor image's
  // agent (src/agent) at KUBERNETES_EXECUTOR_AGENT_PATH (where packaging/executor-image puts
  // it), driven over the pod's attach: a run is a frame, not an exec. false: `sleep` as PID 1
  // and an exec per step. Session pods are exec-driven either way (as docker's sessions).
  bool agent = true;
  std::string agent_path = "/usr/local/lib/code-interpreter/agent";
  // KUBERNETES_SHARED_WARM_POOL (default false): the warm pools (WARM_POOL_SIZE...) are pods in
  // the namespace that any replica claims (shared_pool.h), their sizes per deployment; false:
  // each replica keeps its own, its sandboxes' programs started ahead.
  bool shared_warm_pool = false;
  // KUBERNETES_SANDBOX_API (default pods): agent-sandbox makes each execution's and session's pod a
  // sandbox claimed from the agent-sandbox controller (sandbox_claims.h; SIG Apps'
  // agents.x-k8s.io), its warm pools SandboxWarmPools, instead of pods the daemon creates.
  bool agent_sandbox = false;
};

// Reads the variables above (README.md "Options"). An empty variable is unset (as onyx reads
// them); an invalid value is an error naming the variable and what was expected.
Result<K8sOptions> K8sOptionsFromEnv(const EnvLookup& getenv);

// Kubernetes names (apimachinery validation): a DNS-1123 label (namespaces), a DNS-1123
// subdomain (service accounts, secrets, runtime and priority classes), a label value and a
// qualified name (label and toleration keys: an optional DNS subdomain prefix and '/').
bool IsDnsLabel(std::string_view s);
bool IsDnsSubdomain(std::string_view s);
bool IsLabelValue(std::string_view s);
bool IsQualifiedName(std::string_view s);

// "KEY=VALUE,KEY2=VALUE2" (KUBERNETES_EXECUTOR_NODE_SELECTOR).
Result<std::map<std::string, std::string>> ParseNodeSelector(std::string_view text);
// "KEY[=VALUE][:EFFECT],..." as `kubectl taint` writes a taint (KUBERNETES_EXECUTOR_TOLERATIONS):
// with =VALUE the operator is Equal, without it Exists; no EFFECT tolerates every effect.
Result<std::vector<Toleration>> ParseTolerations(std::string_view text);

}  // namespace ci::k8s
