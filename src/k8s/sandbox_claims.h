// Executions and sessions in sandboxes of the agent-sandbox controller
// (KUBERNETES_SANDBOX_API=agent-sandbox; SIG Apps' agents.x-k8s.io, v1beta1): the pod one needs
// becomes a SandboxTemplate and a SandboxWarmPool named after its key (shared_pool.h PoolKey:
// replicas of one configuration share them), and each claims a sandbox of that pool with a
// SandboxClaim, then attaches to the sandbox's pod as to one of its own. Deleting the claim
// removes the sandbox and its pod (the cluster's garbage collector, in the foreground); the
// claim's shutdownTime is the backstop for a daemon that died first. The documents and the
// verdicts are pure; the rest are API calls.
#pragma once

#include <rapidjson/document.h>

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "core/status.h"
#include "k8s/api_client.h"
#include "k8s/object_watch.h"
#include "k8s/pod_lifecycle.h"

namespace ci::k8s {

// The template's and the warm pool's name for a pod key: "code-interpreter-<key>".
std::string SandboxPoolName(std::string_view key);

// A SandboxTemplate named `name` whose pods are `pod_json` (PodJson of a pod with no owner and no
// expiry): its labels and annotations, and its spec. Unmanaged network policy: the namespace's
// own (packaging/kubernetes) applies, as to the daemon's pods. An error if `pod_json` is not JSON.
Result<std::string> SandboxTemplateJson(std::string_view name, std::string_view pod_json);

// A SandboxWarmPool `name` of `replicas` sandboxes of the template of the same name.
std::string SandboxWarmPoolJson(std::string_view name, size_t replicas);

struct ClaimRequest {
  std::string pool;                    // the SandboxWarmPool's name
  std::string component = "executor";  // or "session" (label)
  std::string instance_id;             // the daemon's (owner label); empty: none
  std::string owner_description;       // annotation
  int64_t shutdown_at = 0;             // unix seconds: the controller deletes the claim then
  // A session's label and annotations (pod_spec.h kSession*): what replicas find it by.
  std::map<std::string, std::string> labels, annotations;
};

// The SandboxClaim of one execution or session (generateName "ci-claim-").
std::string SandboxClaimJson(const ClaimRequest& request);

// A claim's state: OK once it is bound (names its sandbox); an error for the reasons the
// controller never gets past (no template or pool, expired, invalid); else where it stands.
ObjectVerdict ClaimVerdict(const rapidjson::Value& claim);

// A Sandbox's state: OK once it has a pod (its pod-name annotation, or Ready); else where it
// stands.
ObjectVerdict SandboxVerdict(const rapidjson::Value& sandbox);

// The pod of a Sandbox object: its agents.x-k8s.io/pod-name annotation, else its name.
std::string SandboxPodName(const rapidjson::Value& sandbox);

// GETs the Sandbox `name` and returns its pod's name (SandboxPodName).
boost::asio::awaitable<Result<std::string>> SandboxPodOf(ApiClient& api, std::string ns,
                                                         std::string name);

// Creates the template (its pod) and the warm pool named `name` unless they exist (a name is
// the hash of its pod: an existing one is the same); with `set_replicas`, an existing pool's
// size becomes `replicas`. The errors say what to install or grant.
boost::asio::awaitable<Status> EnsureSandboxPool(ApiClient& api, std::string ns, std::string name,
                                                 std::string template_json, size_t replicas,
                                                 bool set_replicas);

struct ClaimedSandbox {
  std::string claim;
  std::string sandbox;
  std::string pod;
};

// Creates the claim and waits (at most `timeout`) until it is bound to a sandbox and the sandbox
// has a pod (whose start the caller watches). The claim is deleted when that fails. `on_created`
// (may be empty) gets the claim's name as soon as it exists.
boost::asio::awaitable<Result<ClaimedSandbox>> ClaimSandbox(
    ApiClient& api, std::string ns, std::string claim_json, std::chrono::milliseconds timeout,
    std::function<void(const std::string&)> on_created = {});

// The reaper's pass over the namespace's claims (app=code-interpreter): a claim left by a daemon
// that is gone, or by this instance before its start (a replica stopped or killed while it
// claimed), is deleted as such a pod is (PodsToReap's rules, on the claims' labels), without
// waiting; else it would hold its sandbox until its shutdownTime (the execution pod TTL).
boost::asio::awaitable<ReapResult> ReapClaims(ApiClient& api, std::string ns,
                                              const ReapRequest& request);

// Deletes the claim in the foreground and waits (at most `confirm_timeout`) until it is gone,
// which is once its sandbox and the sandbox's pod are; one already gone is success.
boost::asio::awaitable<Status> DeleteSandboxClaim(ApiClient& api, std::string ns, std::string name,
                                                  std::chrono::milliseconds confirm_timeout);

}  // namespace ci::k8s
