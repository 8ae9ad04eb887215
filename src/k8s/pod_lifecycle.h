// The executor pod's life over the API (docs/wire-protocols.md "E. Kubernetes executor pods"):
// create, wait until the executor container runs (a watch, each event decided by the pure
// ReadPodState), delete with grace 0 and confirm, and the reaper that removes what a crash, an
// expiry or an earlier run of this daemon left behind (its decision pure too: PodsToReap).
// K8sExecutor/K8sSandbox call these; the HTTP is ApiClient's.
#pragma once

#include <rapidjson/document.h>

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "k8s/api_client.h"

namespace ci::k8s {

enum class PodStateKind {
  kPending,        // keep waiting (not scheduled yet, pulling, ContainerCreating, ...)
  kRunning,        // phase Running and the executor container running: exec can start
  kFailed,         // it will never run: a pull failure, a container the runtime refused, ended
  kUnschedulable,  // PodScheduled=False/Unschedulable: no node has room now (may change)
  kDeleting,       // metadata.deletionTimestamp set: someone deletes it
};

struct PodState {
  PodStateKind kind = PodStateKind::kPending;
  // kFailed/kUnschedulable: what happened (the pod, the image, the kubelet's words) and what to
  // do. kPending/kRunning/kDeleting: where it stands ("phase Pending, executor: waiting
  // (ContainerCreating)"), for a timeout's message.
  std::string message;
};

// The decision from one Pod object (a GET's body, a watch event's object). Pure.
PodState ReadPodState(const rapidjson::Value& pod);

struct CreatedPod {
  std::string name;  // the generated name (generateName)
  std::string uid;
  std::string resource_version;  // where a watch of it starts (WaitRunning)
};

// POST /api/v1/namespaces/{ns}/pods with `json_body` (PodJson). A quota refusal is
// Unavailable("quota"); RBAC and Pod Security refusals (403), an invalid pod (422) and a
// missing namespace (404) are errors with the apiserver's message and what to fix.
boost::asio::awaitable<Result<CreatedPod>> CreatePod(ApiClient& api, std::string_view ns,
                                                     std::string_view json_body);

// Watches the pod from `resource_version` (empty: from a GET) until ReadPodState decides.
// OK: Running. Unavailable("scheduling") when unschedulable, Error for kFailed, Gone when it was
// deleted, Unavailable("pod start") when `timeout` passed first. An expired resourceVersion (410)
// and a watch the server ended early are resumed, from a fresh GET and the last event.
boost::asio::awaitable<Status> WaitRunning(ApiClient& api, std::string_view ns,
                                           std::string_view name, std::string_view resource_version,
                                           std::chrono::milliseconds timeout);

// DELETE with grace 0 (the object goes at once; the kubelet kills the containers after), then
// confirmed gone (a GET 404, else a watch for its DELETED) within `confirm_timeout`. Not found
// is success. An error says the reaper will retry.
boost::asio::awaitable<Status> DeletePod(ApiClient& api, std::string_view ns, std::string_view name,
                                         std::chrono::milliseconds confirm_timeout);

struct ReapRequest {
  std::string instance_id;      // this daemon's code-interpreter.owner value
  int64_t started_at_unix = 0;  // when this daemon started
  int64_t now_unix = 0;
  // Whether the daemon named by an owner label is known to be gone (a dead pid of this host);
  // empty: none is.
  std::function<bool(std::string_view owner)> owner_gone;
};

struct ReapDecision {
  std::string name;
  std::string reason;  // "expired at 2026-12-01T15:00:00Z", ...
};

// From a PodList (GET .../pods?labelSelector=...), or a list of our SandboxClaims (same labels):
// which to delete, and why. Pure.
// (a) code-interpreter.expires-at in the past (any owner: the pod outlived its use);
// (b) a pod of a daemon that is gone: this instance's from before it started (a restart of the
//     same daemon pod left it) or one whose owner_gone says so. Session pods too, unless they
//     say they outlive their daemon (kOutlivesDaemonAnnotation: the setting of the replica that
//     made them): then any replica serves them (session_pods.h) until they expire;
// (c) a finished pod (phase Succeeded or Failed) of this instance.
std::vector<ReapDecision> PodsToReap(const rapidjson::Value& pod_list, const ReapRequest& request);

struct ReapResult {
  std::vector<ReapDecision> deleted;
  std::vector<std::string> errors;  // one message per failure (the next round retries)
};

// Lists our pods in `ns` (app=code-interpreter, component in (executor,session)) and
// deletes what PodsToReap names, with grace 0 (not waiting for each to be confirmed gone).
boost::asio::awaitable<ReapResult> ReapPods(ApiClient& api, std::string_view ns,
                                            const ReapRequest& request);

// The reaper's list path (the selector URL-encoded).
std::string ReapListPath(std::string_view ns);

}  // namespace ci::k8s
