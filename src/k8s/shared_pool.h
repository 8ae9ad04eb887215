// The warm pool every replica of a deployment shares (KUBERNETES_SHARED_WARM_POOL, README.md
// "Shared warm pool"): pods made ahead, labelled with the pool's key (a hash of the pod they are,
// so replicas of one configuration share them and others never take them) and with no claim.
// A replica takes one by patching its claim label with the resourceVersion it listed: the API
// server applies the first patch and answers 409 Conflict to every other, so no pod is ever
// taken twice. The decisions are pure; ListPoolPods and ClaimPoolPod are the API calls.
#pragma once

#include <rapidjson/document.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "k8s/api_client.h"

namespace ci::k8s {

// The pool's key from the JSON of the pod it keeps (made with no owner, no times): 20 hex digits
// of its SHA-256, a label value.
std::string PoolKey(std::string_view pod_json);

struct FreePoolPod {
  std::string name;
  std::string resource_version;  // the claim's precondition
  int64_t expires_at = 0;        // its expiry label (unix seconds)
  bool running = false;          // phase Running (else still Pending)
};

// GET path of the pool's unclaimed pods.
std::string FreePoolPodsPath(std::string_view ns, std::string_view key);

struct PoolPods {
  std::vector<FreePoolPod> free;
  std::vector<std::string> ended;  // unclaimed pods that finished (phase Failed or Succeeded)
};

// From a PodList of the pool's unclaimed pods: those that can still serve an execution (not
// being deleted, not finished, expiring after `usable_until`, unix seconds), Running ones first,
// then by name; and those that ended unused (the keeper deletes them). Pure.
PoolPods PoolPodsFrom(const rapidjson::Value& pod_list, int64_t usable_until);

boost::asio::awaitable<Result<PoolPods>> ListPoolPods(ApiClient& api, std::string_view ns,
                                                      std::string_view key, int64_t usable_until);

// The merge patch of a claim: the pod's resourceVersion as the precondition, the claim label,
// and the owner label and annotation of the replica that takes it (its reaper's from then on).
std::string ClaimPatchJson(std::string_view resource_version, std::string_view instance_id,
                           std::string_view owner_description);

// PATCHes the claim. true: the pod is ours; false: another replica took it first (409) or it is
// gone (404); an error for anything else.
boost::asio::awaitable<Result<bool>> ClaimPoolPod(ApiClient& api, std::string_view ns,
                                                  const FreePoolPod& pod,
                                                  std::string_view instance_id,
                                                  std::string_view owner_description);

struct SharedPoolStats {
  size_t free = 0;         // unclaimed pods at the keeper's last look
  uint64_t claims = 0;     // executions served by a pooled pod
  uint64_t misses = 0;     // executions that found no free pod (their pod made on the spot)
  uint64_t conflicts = 0;  // claims another replica won first
  uint64_t created = 0;    // pods this replica added to the pool
  uint64_t create_failures = 0;
};

// One shared pool as this replica sees it: a keeper that looks every `period` (and at once after
// a claim) and adds a pod while fewer than `size` are free, backing off as RefillBackoff says
// when it cannot; and the claims of this replica's executions. Every replica runs a keeper: two
// looking at once may each add the missing pod, so the pool can exceed its size by a pod per
// other replica for a while (the extra pods serve the next executions, or expire).
class SharedPoolKeeper : public std::enable_shared_from_this<SharedPoolKeeper> {
 public:
  struct Options {
    std::string ns;
    std::string key;
    size_t size = 0;
    // A pod is claimed only this long before its expiry: the execution's time in it.
    std::chrono::seconds margin{600};
    std::chrono::milliseconds period{2000};
  };
  // `pod_json(now)`: the body of a new pool pod (its expiry from `now`, unix seconds).
  // `paused()`: whether to create none now (the pods would not be what the key says).
  SharedPoolKeeper(boost::asio::any_io_executor ex, std::shared_ptr<ApiClient> api, Options o,
                   std::function<std::string(int64_t now)> pod_json, std::function<bool()> paused);

  void Start();
  // The pool is `n` pods larger (another pool of the same pods).
  void Grow(size_t n);
  // Ends the keeper's loop at its next step; stopped() once it has.
  void Stop();
  bool stopped() const { return !running_; }
  // A free pod claimed for this replica: its name; nullopt when there was none (a miss). Either
  // way the keeper looks again at once.
  boost::asio::awaitable<Result<std::optional<std::string>>> Claim(std::string instance_id,
                                                                   std::string owner_description);
  const SharedPoolStats& stats() const { return stats_; }
  const Options& options() const { return o_; }

 private:
  boost::asio::awaitable<void> Keep();
  void Wake();

  boost::asio::any_io_executor ex_;
  std::shared_ptr<ApiClient> api_;
  Options o_;
  std::function<std::string(int64_t)> pod_json_;
  std::function<bool()> paused_;
  boost::asio::steady_timer wake_;
  bool woken_ = false;  // a wake while the keeper was not waiting: it looks again at once
  bool stopping_ = false;
  bool running_ = false;
  int failures_ = 0;
  std::string last_error_;  // logged once until it changes
  SharedPoolStats stats_;
};

}  // namespace ci::k8s
