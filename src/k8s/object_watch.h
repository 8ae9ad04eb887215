// One object watched until its state decides (a pod until it runs, a SandboxClaim until it is
// bound and ready): a GET when there is no start point, then watches by name from the last
// resourceVersion, resumed after an expired one (410) or a watch the server ended.
#pragma once

#include <rapidjson/document.h>

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/status.h"
#include "k8s/api_client.h"

namespace ci::k8s {

struct WatchedObject {
  std::string collection;  // "/api/v1/namespaces/ns/pods": the object is collection/name
  std::string name;
  std::string noun;            // "pod", "SandboxClaim": in messages
  std::string goal;            // "Running": the timeout says "pod x not Running after N s: ..."
  std::string timeout_reason;  // the timeout is Unavailable(timeout_reason, ...)
  Status gone;                 // what a 404 or a DELETED event returns
};

// One state of the object: decided (OK or why not), or where it stands (for the timeout).
struct ObjectVerdict {
  std::optional<Status> decided;
  std::string state;
};
using JudgeObject = std::function<ObjectVerdict(const rapidjson::Value& object)>;

// GET path of a watch of `name` in `collection` from `resource_version`, ended by the server
// after `timeout_sec`.
std::string ObjectWatchPath(const std::string& collection, const std::string& name,
                            const std::string& resource_version, int64_t timeout_sec);

// Whole seconds for timeoutSeconds, at least 1 (0 would mean the server's default).
int64_t CeilSeconds(std::chrono::steady_clock::duration d);

// Watches `object` from `resource_version` (empty: from a GET) until `judge` decides, for at most
// `timeout`. A watch ERROR other than an expiry is an error, as is a server that ends the watch
// at once three times in a row.
boost::asio::awaitable<Status> WatchUntil(ApiClient& api, WatchedObject object,
                                          std::string resource_version,
                                          std::chrono::milliseconds timeout, JudgeObject judge);

}  // namespace ci::k8s
