// What the daemon's credentials may do with pods' streams, asked of the API server with
// SelfSubjectAccessReviews (authorization.k8s.io/v1) before the first pod needs them: attach
// carries an agent-driven pod's steps, exec every other step. A WebSocket upgrade is a GET, and
// newer API servers check create for it too, so each subresource needs both verbs.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>
#include <string_view>

#include "core/status.h"
#include "k8s/api_client.h"

namespace ci::k8s {

// The POST body of one review. Pure.
std::string AccessReviewJson(std::string_view ns, std::string_view verb, std::string_view resource,
                             std::string_view subresource);
// status.allowed of the API server's answer; an error when the answer is not a review. Pure.
Result<bool> ReadAccessReview(std::string_view body);

// What the credentials may not do ("get pods/attach or create pods/attach"); "" when allowed.
struct PodStreamAccess {
  std::string exec_refused;
  std::string attach_refused;
};

// Reviews get and create on pods/exec and pods/attach in `ns`. An error when a review could not
// be made (no authorization API, its own refusal): then only a real attach tells.
boost::asio::awaitable<Result<PodStreamAccess>> ReviewPodStreams(ApiClient& api, std::string ns);

}  // namespace ci::k8s
