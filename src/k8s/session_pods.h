// Sessions held by the cluster (issue #11 item 4): a session's pod carries its id as a label and
// its times and relay token as annotations (pod_spec.h), so any replica finds it by label, lists
// it, and attaches to its interpreter. The decisions are pure; the one API call is ListSessionPods.
#pragma once

#include <rapidjson/document.h>

#include <boost/asio/awaitable.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/sandbox_spec.h"
#include "core/status.h"
#include "k8s/api_client.h"

namespace ci::k8s {

struct SessionPod {
  std::string name;  // the pod's; from a claim, its sandbox's (whose pod the caller reads)
  SessionIdentity identity;
  std::string token;  // its interpreter's relay token
  std::string claim;  // KUBERNETES_SANDBOX_API=agent-sandbox: the session's SandboxClaim
};

// Whether `id` can be a label value (what the API's session ids are): 1 to 63 of [a-z0-9-],
// alphanumeric at both ends. Anything else names no session and never reaches a selector.
bool IsSessionLabelValue(std::string_view id);

// GET path of the namespace's session pods; only the one with `id` unless it is empty.
std::string SessionPodsPath(std::string_view ns, std::string_view id);

// From a PodList: the sessions to serve. A pod that is terminating, not Running, past its expiry
// at `now_unix` or without its annotations is no session (it is ending, or not ours). Pure.
std::vector<SessionPod> SessionPodsFrom(const rapidjson::Value& pod_list, double now_unix);

boost::asio::awaitable<Result<std::vector<SessionPod>>> ListSessionPods(ApiClient& api,
                                                                        std::string_view ns,
                                                                        std::string_view id);

// The same for sessions in claimed sandboxes (agent-sandbox): the claim carries the labels and
// annotations a session pod would (the controller lets a claim put only some on its pod), and
// a claim not bound to a sandbox yet, or being deleted, is no session.
std::string SessionClaimsPath(std::string_view ns, std::string_view id);
std::vector<SessionPod> SessionClaimsFrom(const rapidjson::Value& claim_list, double now_unix);
boost::asio::awaitable<Result<std::vector<SessionPod>>> ListSessionClaims(ApiClient& api,
                                                                          std::string_view ns,
                                                                          std::string_view id);

}  // namespace ci::k8s
