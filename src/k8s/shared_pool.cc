#include "k8s/shared_pool.h"

#include <openssl/sha.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdlib>

#include "core/json.h"
#include "core/random.h"
#include "core/refill_backoff.h"
#include "core/unix_time.h"
#include "k8s/pod_fields.h"
#include "k8s/pod_lifecycle.h"
#include "k8s/pod_spec.h"

namespace ci::k8s {

std::string PoolKey(std::string_view pod_json) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(pod_json.data()), pod_json.size(), d);
  return HexEncode(std::string(reinterpret_cast<const char*>(d), 10));
}

std::string FreePoolPodsPath(std::string_view ns, std::string_view key) {
  // labelSelector=app=code-interpreter,code-interpreter.pool=KEY,!code-interpreter.claimed-by
  return "/api/v1/namespaces/" + std::string(ns) + "/pods?labelSelector=" + kAppLabel + "%3D" +
         kAppValue + "%2C" + kPoolLabel + "%3D" + std::string(key) + "%2C%21" + kClaimLabel;
}

PoolPods PoolPodsFrom(const rapidjson::Value& pod_list, int64_t usable_until) {
  PoolPods out;
  for (const rapidjson::Value* pod : Items(&pod_list, "items")) {
    const rapidjson::Value* meta = Member(pod, "metadata");
    const rapidjson::Value* labels = Member(meta, "labels");
    if (Member(meta, "deletionTimestamp") != nullptr || Member(labels, kClaimLabel) != nullptr) {
      continue;
    }
    FreePoolPod p;
    p.name = Str(meta, "name");
    const std::string phase = Str(Member(pod, "status"), "phase");
    if (phase == "Failed" || phase == "Succeeded") {
      if (!p.name.empty()) out.ended.push_back(p.name);
      continue;
    }
    p.resource_version = Str(meta, "resourceVersion");
    p.running = phase == "Running";
    const std::string expires = Str(labels, kExpiresLabel);
    char* end = nullptr;
    p.expires_at = std::strtoll(expires.c_str(), &end, 10);
    if (p.name.empty() || p.resource_version.empty() || expires.empty() || *end != '\0' ||
        p.expires_at <= usable_until) {
      continue;
    }
    out.free.push_back(std::move(p));
  }
  std::stable_sort(out.free.begin(), out.free.end(),
                   [](const FreePoolPod& a, const FreePoolPod& b) {
                     return a.running != b.running ? a.running : a.name < b.name;
                   });
  return out;
}

boost::asio::awaitable<Result<PoolPods>> ListPoolPods(ApiClient& api, std::string_view ns,
                                                      std::string_view key, int64_t usable_until) {
  const std::string path = FreePoolPodsPath(ns, key);
  auto listed = co_await api.Request("GET", path, "");
  if (!listed.ok()) co_return listed.status().Context("listing the shared warm pool's pods");
  if (!listed->ok()) {
    co_return ApiError("listing the shared warm pool's pods in namespace " + std::string(ns),
                       *listed);
  }
  rapidjson::Document d;
  std::string why;
  if (!ParseJson(listed->body, d, why)) {
    co_return Status::Error("listing the shared warm pool's pods: " + why);
  }
  co_return PoolPodsFrom(d, usable_until);
}

std::string ClaimPatchJson(std::string_view resource_version, std::string_view instance_id,
                           std::string_view owner_description) {
  rapidjson::StringBuffer b;
  JsonWriter w(b);
  json::FieldWriter v(w);
  w.StartObject();
  w.Key("metadata");
  w.StartObject();
  v("resourceVersion", resource_version);
  w.Key("labels");
  w.StartObject();
  v(kClaimLabel, instance_id);
  v(kOwnerLabel, instance_id);
  w.EndObject();
  w.Key("annotations");
  w.StartObject();
  v(kOwnerAnnotation, owner_description);
  w.EndObject();
  w.EndObject();
  w.EndObject();
  return b.GetString();
}

boost::asio::awaitable<Result<bool>> ClaimPoolPod(ApiClient& api, std::string_view ns,
                                                  const FreePoolPod& pod,
                                                  std::string_view instance_id,
                                                  std::string_view owner_description) {
  const std::string path = "/api/v1/namespaces/" + std::string(ns) + "/pods/" + pod.name;
  const std::string body = ClaimPatchJson(pod.resource_version, instance_id, owner_description);
  auto r = co_await api.Request("PATCH", path, body);
  if (!r.ok()) co_return r.status().Context("claiming pooled pod " + pod.name);
  if (r->status == 409 || r->status == 404) co_return false;
  if (!r->ok()) co_return ApiError("claiming pooled pod " + pod.name, *r);
  co_return true;
}

SharedPoolKeeper::SharedPoolKeeper(boost::asio::any_io_executor ex, std::shared_ptr<ApiClient> api,
                                   Options o, std::function<std::string(int64_t)> pod_json,
                                   std::function<bool()> paused)
    : ex_(ex),
      api_(std::move(api)),
      o_(std::move(o)),
      pod_json_(std::move(pod_json)),
      paused_(std::move(paused)),
      wake_(ex) {}

void SharedPoolKeeper::Start() {
  running_ = true;
  boost::asio::co_spawn(ex_, Keep(), boost::asio::detached);
}

void SharedPoolKeeper::Grow(size_t n) {
  o_.size += n;
  Wake();
}

void SharedPoolKeeper::Stop() {
  stopping_ = true;
  Wake();
}

void SharedPoolKeeper::Wake() {
  woken_ = true;
  wake_.cancel();
}

boost::asio::awaitable<void> SharedPoolKeeper::Keep() {
  auto self = shared_from_this();
  while (!stopping_) {
    woken_ = false;  // a wake from here on means: look again
    std::chrono::milliseconds wait = o_.period;
    std::string error;
    // The callbacks are the executor's: none is called once Stop was (it may be gone).
    if (!paused_()) {
      const int64_t usable_until = UnixSeconds() + o_.margin.count();
      auto pods = co_await ListPoolPods(*api_, o_.ns, o_.key, usable_until);
      if (!pods.ok()) error = pods.status().message();
      size_t n = pods.ok() ? pods->free.size() : o_.size;
      if (pods.ok()) stats_.free = n;
      // Pods that ended unused (an image that cannot run, a node that went): removed, and the
      // pool backs off as when it cannot create them.
      std::vector<std::string> ended;
      if (pods.ok()) ended = pods->ended;
      const std::chrono::milliseconds no_confirm(0);
      for (const std::string& name : ended) {
        error = "pooled pod " + name +
                " ended before an execution claimed it (its events and log say why)";
        co_await DeletePod(*api_, o_.ns, name, no_confirm);
      }
      // One pod per look, then a look again at once: replicas that look at the same moment
      // each add one pod, not each the whole shortfall.
      if (error.empty() && n < o_.size && !stopping_) {
        const std::string body = pod_json_(UnixSeconds());
        auto created = co_await CreatePod(*api_, o_.ns, body);
        if (!created.ok()) {
          ++stats_.create_failures;
          error = created.status().message();
        } else {
          ++stats_.created;
          woken_ = woken_ || n + 1 < o_.size;
          spdlog::debug("shared warm pool {}: added pod {}", o_.key, created->name);
        }
      }
    }
    if (!error.empty()) {
      wait = RefillBackoff(++failures_);
      if (error != last_error_) {
        spdlog::warn("shared warm pool {} in namespace {}: {}; trying again in {} s", o_.key, o_.ns,
                     error, std::chrono::duration_cast<std::chrono::seconds>(wait).count());
      }
    } else {
      failures_ = 0;
    }
    last_error_ = error;
    if (woken_ || stopping_) continue;
    wake_.expires_after(wait);
    boost::system::error_code ec;
    co_await wake_.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  }
  running_ = false;
}

boost::asio::awaitable<Result<std::optional<std::string>>> SharedPoolKeeper::Claim(
    std::string instance_id, std::string owner_description) {
  const int64_t usable_until = UnixSeconds() + o_.margin.count();
  auto pods = co_await ListPoolPods(*api_, o_.ns, o_.key, usable_until);
  if (!pods.ok()) co_return pods.status();
  std::vector<FreePoolPod>* free = &pods->free;
  // Replicas claiming at once start at different running pods, so that most first tries win.
  auto running_end =
      std::find_if(free->begin(), free->end(), [](const FreePoolPod& p) { return !p.running; });
  const auto running = running_end - free->begin();
  if (running > 1) {
    uint32_t r = 0;
    RandomBytes(&r, sizeof r);
    std::rotate(free->begin(), free->begin() + r % running, running_end);
  }
  for (const FreePoolPod& pod : *free) {
    auto got = co_await ClaimPoolPod(*api_, o_.ns, pod, instance_id, owner_description);
    if (!got.ok()) co_return got.status();
    if (*got) {
      ++stats_.claims;
      Wake();
      co_return std::optional<std::string>(pod.name);
    }
    ++stats_.conflicts;
  }
  ++stats_.misses;
  Wake();
  co_return std::optional<std::string>();
}

}  // namespace ci::k8s
