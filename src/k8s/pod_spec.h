// SandboxSpec -> the executor Pod (docs/wire-protocols.md "E. Kubernetes executor pods"), as a pure
// function tested against golden JSON (tests/k8s/golden), the way docker/container_config.h builds
// ContainerCreate: the spec and the options become a Pod value, the JSON POSTed and the enforcement
// report are both read from that value.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/measure.h"
#include "core/sandbox_spec.h"
#include "k8s/k8s_options.h"

namespace ci::k8s {

// What a pod is for: one execution (made ahead of it by a warm pool, or for it), or a session
// (many runs until its expiry).
enum class PodKind { kExecution, kSession };

// The labels and annotations every pod of ours carries (the reaper's and NetworkPolicy's
// selectors: app=code-interpreter, component in (executor, session)).
inline constexpr const char* kAppLabel = "app";
inline constexpr const char* kAppValue = "code-interpreter";
inline constexpr const char* kComponentLabel = "component";           // executor | session
inline constexpr const char* kOwnerLabel = "code-interpreter.owner";  // the daemon instance id
inline constexpr const char* kExpiresLabel = "code-interpreter.expires-at";    // unix seconds
inline constexpr const char* kOwnerAnnotation = "code-interpreter/owner";      // free text
inline constexpr const char* kKindAnnotation = "code-interpreter/kind";        // execution|...
inline constexpr const char* kExpiresAnnotation = "code-interpreter/expires";  // RFC 3339, UTC
// A session pod's: the API's session id (label, what replicas find it by), its times (unix
// seconds, as the API reports them) and the token its interpreter's relays prove
// (python_session.cc; whoever may read the pod may exec into it anyway).
inline constexpr const char* kSessionLabel = "code-interpreter.session";
inline constexpr const char* kSessionCreatedAnnotation = "code-interpreter/session-created-at";
inline constexpr const char* kSessionExpiresAnnotation = "code-interpreter/session-expires-at";
inline constexpr const char* kSessionTokenAnnotation = "code-interpreter/session-token";
// The API key's name the session belongs to (absent without keys): other callers never see it.
inline constexpr const char* kSessionClientAnnotation = "code-interpreter/session-client";
// "true" on a session pod that outlives its daemon (KUBERNETES_SESSIONS_OUTLIVE_DAEMON of the
// replica that made it): no reaper deletes it for its daemon being gone.
inline constexpr const char* kOutlivesDaemonAnnotation = "code-interpreter/outlives-daemon";
// A shared warm pool's pod (shared_pool.h): the pool's key, and the replica that claimed it.
inline constexpr const char* kPoolLabel = "code-interpreter.pool";
inline constexpr const char* kClaimLabel = "code-interpreter.claimed-by";
// The program's container, and the init container of KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN.
inline constexpr const char* kExecutorContainer = "executor";
inline constexpr const char* kLockdownContainer = "network-lockdown";

// Which pod the executor asks for, besides the spec.
struct PodRequest {
  int64_t now = 0;                // unix seconds: expiries are computed from it
  std::string instance_id;        // the daemon instance (label value): owner label
  std::string owner_description;  // annotation, e.g. "pod code-interpreter-7c9d/ns (uid ...)"
  // The daemon's namespace (the connection's): ownerReferences cannot cross namespaces (an owner
  // elsewhere looks deleted, and the garbage collector removes the pod at once).
  std::string daemon_namespace;
};

// Everything the Pod is made of besides the SandboxSpec.
struct PodOptions {
  PodKind kind = PodKind::kExecution;
  std::string name;  // empty: metadata.generateName "ci-<kind>-"
  std::string image;
  std::string lockdown_image;  // empty: no network-lockdown init container
  std::string service_account;
  PodOverrides overrides;
  std::optional<OwnerPod> owner;  // ownerReferences to the daemon's pod
  std::string instance_id;
  std::string owner_description;
  int64_t expires_at = 0;            // unix seconds; 0: none (a sandbox's pod)
  int64_t active_deadline_sec = 0;   // activeDeadlineSeconds (0: none)
  std::vector<std::string> command;  // PID 1: a process that only waits, or the agent
  // The agent's stdin (`stdin: true`, without stdinOnce): the daemon attaches to it.
  bool agent = false;
  SessionIdentity session;       // sessions: labels and annotations
  bool outlives_daemon = false;  // sessions: no ownerReference, spared by reapers
  std::string session_token;     // sessions: annotation (the executor's Prepare sets it)
  std::string pool_key;          // a shared warm pool's pod: the pool's key (label)
};

// The options the executor's Prepare uses: a session pod's deadline, expiry and PID 1's sleep are
// its spec's session_expires_at; an execution pod's deadline and expiry the execution pod TTL (a
// backstop: the daemon deletes the pod after its run, the reaper what a crash left), and its PID 1
// the agent when K8sOptions::agent says so.
PodOptions PodOptionsFor(const K8sOptions& options, const SandboxSpec& spec,
                         const PodRequest& request);

struct ContainerResources {
  uint64_t memory_limit = 0;    // bytes, requests = limits
  uint32_t cpu_millicores = 0;  // limits (= requests); 0: no CPU limit
};

// The Pod as values (core/v1): what the API server is asked to run. Only what we set.
struct Pod {
  // metadata
  std::string name;
  std::string generate_name;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::optional<OwnerPod> owner;
  // spec
  int64_t active_deadline_sec = 0;
  std::string service_account;
  std::string hostname;
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
  std::string runtime_class;
  std::string priority_class;
  std::vector<std::string> image_pull_secrets;
  // pod securityContext
  uint32_t run_as_user = 0;
  uint32_t run_as_group = 0;
  uint32_t fs_group = 0;
  std::string seccomp_type;  // RuntimeDefault | Localhost
  std::string seccomp_localhost_profile;
  // the executor container
  std::string image;
  std::string image_pull_policy;
  std::vector<std::string> command;
  bool stdin = false;  // PID 1 reads the pod's attach (the agent)
  std::string working_dir;
  std::vector<std::pair<std::string, std::string>> env;
  bool read_only_root = true;
  ContainerResources resources;
  // The spec's limits: the emptyDir sizeLimits (medium Memory, /workspace and /tmp) are taken
  // from them; pids and the rlimits are what a pod cannot carry (PodDowngrades names each).
  SandboxLimits limits;
  // the network-lockdown init container (root with NET_ADMIN, iptables), when present
  std::string lockdown_image;
  std::string seccomp_profile_name;  // the spec's profile, for the report
  bool spec_has_seccomp = false;
};

Pod PodFromSpec(const SandboxSpec& spec, const PodOptions& options);
// Compact JSON, members in a fixed order (golden-testable): the body of
// POST /api/v1/namespaces/{ns}/pods.
std::string PodJson(const Pod& pod);
std::string PodJson(const SandboxSpec& spec, const PodOptions& options);

// The init container's script: every packet but loopback dropped, IPv4 and IPv6 (when the pod's
// network namespace has IPv6 at all).
extern const char* const kLockdownScript;

// What a pod created from `pod` enforces, read from the value: its part of the backend's
// Enforcement (/health `hardening.enforced`).
std::vector<Measure> PodMeasures(const Pod& pod);
// What the spec asks for and a pod cannot give, each named with the reason and the fix: no pids
// limit per pod, no rlimits, network isolation only from a NetworkPolicy (without the lockdown),
// one host uid for every pod, the runtime's default seccomp filter instead of ours, the
// lockdown's exception to the restricted Pod Security Standard.
std::vector<Downgrade> PodDowngrades(const Pod& pod);

// The downgrade naming the /proc files a pod cannot mask (core/proc_masks.h's list).
inline constexpr const char* kProcMasksDowngrade = "host facts masked in /proc";

// 268435456 -> "256Mi", 1536 -> "1536" ... (a resource.Quantity in the binary SI form when exact).
std::string BytesQuantity(uint64_t bytes);
// 1700000000.25 -> "1700000000.25" (a session's times in its annotations, round-tripping).
std::string UnixSecondsText(double unix_seconds);

}  // namespace ci::k8s
