#include "k8s/sandbox_claims.h"

#include <algorithm>
#include <memory>

#include "core/json.h"
#include "core/rfc3339.h"
#include "k8s/pod_fields.h"
#include "k8s/pod_spec.h"

namespace ci::k8s {
namespace {

namespace asio = boost::asio;
using rapidjson::Value;

constexpr char kSandboxes[] = "/apis/agents.x-k8s.io/v1beta1/namespaces/";
constexpr char kExtensions[] = "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/";
constexpr char kPodNameAnnotation[] = "agents.x-k8s.io/pod-name";
constexpr char kExtensionsVersion[] = "extensions.agents.x-k8s.io/v1beta1";
constexpr char kClaimDeleteOptions[] =
    R"({"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Foreground"})";

// Claim reasons the controller does not get past by waiting.
constexpr const char* kTerminalReasons[] = {
    "TemplateNotFound",          "WarmPoolNotFound", "InvalidMetadata", "EnvVarsInjectionRejected",
    "VolumeClaimTemplatesError", "ClaimExpired",     "SandboxExpired"};

std::string Collection(const char* group, const std::string& ns, const char* plural) {
  return group + ns + "/" + plural;
}

std::string Compact(const Value* v) {
  if (v == nullptr) return "{}";
  return JsonText([&](JsonWriter& w) { v->Accept(w); });
}

void Raw(JsonWriter& w, const std::string& json) {
  w.RawValue(json.data(), json.size(), rapidjson::kObjectType);
}

// `{"apiVersion": ..., "kind": kind, "metadata": {"name": name, "labels": {"app": ...}},` of
// one of the daemon's extensions objects; the caller writes the rest and ends the object.
void StartNamed(JsonWriter& w, std::string_view kind, std::string_view name) {
  w.StartObject();
  WriteField(w, "apiVersion", kExtensionsVersion);
  WriteField(w, "kind", kind);
  w.Key("metadata");
  w.StartObject();
  WriteField(w, "name", name);
  w.Key("labels");
  w.StartObject();
  WriteField(w, kAppLabel, kAppValue);
  w.EndObject();
  w.EndObject();
}

// What a refusal of a create means for this mode: the kinds not served, or not granted.
Status CreateRefused(const std::string& what, const std::string& ns, const ApiResponse& r) {
  const std::string refused = ApiError(what, r).message();
  if (r.status == 404) {
    return Status::Error(refused +
                         "; the agent-sandbox kinds are not served in the cluster: install "
                         "agent-sandbox (its CRDs, and its controller with the extensions), or "
                         "set KUBERNETES_SANDBOX_API=pods");
  }
  if (r.status == 403) {
    return Status::Error(refused +
                         "; grant the daemon's service account the agent-sandbox rules of "
                         "packaging/helm (sandboxApi: agent-sandbox) in namespace " +
                         ns);
  }
  return Status::Error(refused);
}

// POST `body` to `collection`; an existing object of the same name is success (false).
asio::awaitable<Result<bool>> CreateUnlessExists(ApiClient& api, const std::string& ns,
                                                 const std::string& collection,
                                                 const std::string& body, const std::string& what) {
  auto r = co_await api.Request("POST", collection, body);
  if (!r.ok()) co_return r.status().Context(what);
  if (r->status == 409) co_return false;
  if (!r->ok()) co_return CreateRefused(what, ns, *r);
  co_return true;
}

// The Ready condition of an object's status, in words; nullptr when it has none.
const Value* ReadyCondition(const Value* status) {
  const Value* ready = nullptr;
  for (const Value* c : Items(status, "conditions")) {
    if (Str(c, "type") == "Ready") ready = c;
  }
  return ready;
}

std::string ReadyWords(const Value* ready) {
  return "Ready " + Str(ready, "status") + " (" + Str(ready, "reason") +
         "): " + Str(ready, "message");
}

}  // namespace

std::string SandboxPoolName(std::string_view key) {
  return std::string(kAppValue) + "-" + std::string(key);
}

Result<std::string> SandboxTemplateJson(std::string_view name, std::string_view pod_json) {
  rapidjson::Document pod;
  std::string why;
  if (!ParseJson(pod_json, pod, why) || !pod.IsObject()) {
    return Status::Error("the sandbox template's pod: " + why);
  }
  const Value* meta = Member(&pod, "metadata");
  const std::string labels = Compact(Member(meta, "labels"));
  const std::string annotations = Compact(Member(meta, "annotations"));
  const std::string spec = Compact(Member(&pod, "spec"));
  return JsonText([&](JsonWriter& w) {
    StartNamed(w, "SandboxTemplate", name);
    w.Key("spec");
    w.StartObject();
    w.Key("podTemplate");
    w.StartObject();
    w.Key("metadata");
    w.StartObject();
    w.Key("labels");
    Raw(w, labels);
    w.Key("annotations");
    Raw(w, annotations);
    w.EndObject();
    w.Key("spec");
    Raw(w, spec);
    w.EndObject();
    // The daemon's NetworkPolicy selects these pods by their labels; the controller's default
    // policy would admit only its router, not the daemon's attach.
    WriteField(w, "networkPolicyManagement", "Unmanaged");
    w.EndObject();
    w.EndObject();
  });
}

std::string SandboxWarmPoolJson(std::string_view name, size_t replicas) {
  return JsonText([&](JsonWriter& w) {
    StartNamed(w, "SandboxWarmPool", name);
    w.Key("spec");
    w.StartObject();
    w.Key("replicas");
    w.Uint64(replicas);
    w.Key("sandboxTemplateRef");
    w.StartObject();
    WriteField(w, "name", name);
    w.EndObject();
    w.EndObject();
    w.EndObject();
  });
}

std::string SandboxClaimJson(const ClaimRequest& c) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "apiVersion", kExtensionsVersion);
    WriteField(w, "kind", "SandboxClaim");
    w.Key("metadata");
    w.StartObject();
    WriteField(w, "generateName", "ci-claim-");
    w.Key("labels");
    w.StartObject();
    WriteField(w, kAppLabel, kAppValue);
    WriteField(w, kComponentLabel, c.component);
    if (!c.instance_id.empty()) WriteField(w, kOwnerLabel, c.instance_id);
    for (const auto& [k, v] : c.labels) WriteField(w, k, v);
    w.EndObject();
    w.Key("annotations");
    w.StartObject();
    WriteField(w, kOwnerAnnotation, c.owner_description);
    for (const auto& [k, v] : c.annotations) WriteField(w, k, v);
    w.EndObject();
    w.EndObject();
    w.Key("spec");
    w.StartObject();
    w.Key("warmPoolRef");
    w.StartObject();
    WriteField(w, "name", c.pool);
    w.EndObject();
    w.Key("lifecycle");
    w.StartObject();
    WriteField(w, "shutdownTime", Rfc3339(c.shutdown_at));
    WriteField(w, "shutdownPolicy", "Delete");
    w.EndObject();
    w.EndObject();
    w.EndObject();
  });
}

ObjectVerdict ClaimVerdict(const Value& claim) {
  const Value* meta = Member(&claim, "metadata");
  const Value* status = Member(&claim, "status");
  const std::string name = Str(meta, "name");
  if (Member(meta, "deletionTimestamp") != nullptr) {
    return {Status::Gone("SandboxClaim " + name + " is being deleted"), ""};
  }
  if (!Str(Member(status, "sandbox"), "name").empty()) return {Status(), ""};
  const Value* ready = ReadyCondition(status);
  if (ready == nullptr) {
    return {std::nullopt,
            "not bound to a sandbox yet, no Ready condition: is the agent-sandbox controller "
            "running, with its extensions (SandboxClaim, SandboxWarmPool)?"};
  }
  const std::string words = ReadyWords(ready);
  const std::string reason = Str(ready, "reason");
  for (const char* terminal : kTerminalReasons) {
    if (reason == terminal) return {Status::Error("SandboxClaim " + name + ": " + words), words};
  }
  return {std::nullopt, "not bound to a sandbox yet, " + words};
}

ObjectVerdict SandboxVerdict(const Value& sandbox) {
  const Value* meta = Member(&sandbox, "metadata");
  const Value* ready = ReadyCondition(Member(&sandbox, "status"));
  if (!Str(Member(meta, "annotations"), kPodNameAnnotation).empty() ||
      Str(ready, "status") == "True") {
    return {Status(), ""};
  }
  if (Member(meta, "deletionTimestamp") != nullptr) {
    return {Status::Gone("Sandbox " + Str(meta, "name") + " is being deleted"), ""};
  }
  return {std::nullopt, ready == nullptr ? "no pod yet" : "no pod yet, " + ReadyWords(ready)};
}

std::string SandboxPodName(const Value& sandbox) {
  const Value* meta = Member(&sandbox, "metadata");
  const std::string pod = Str(Member(meta, "annotations"), kPodNameAnnotation);
  return pod.empty() ? Str(meta, "name") : pod;
}

asio::awaitable<Result<std::string>> SandboxPodOf(ApiClient& api, std::string ns,
                                                  std::string name) {
  const std::string path = Collection(kSandboxes, ns, "sandboxes") + "/" + name;
  const std::string what = "reading Sandbox " + name;
  auto got = co_await api.Request("GET", path, "");
  if (!got.ok()) co_return got.status().Context(what);
  if (got->status == 404) co_return Status::Gone("Sandbox " + name + " is gone");
  if (!got->ok()) co_return ApiError(what, *got);
  rapidjson::Document sandbox;
  std::string why;
  if (!ParseJson(got->body, sandbox, why)) co_return Status::Error(what + ": " + why);
  co_return SandboxPodName(sandbox);
}

asio::awaitable<Status> EnsureSandboxPool(ApiClient& api, std::string ns, std::string name,
                                          std::string template_json, size_t replicas,
                                          bool set_replicas) {
  const std::string templates = Collection(kExtensions, ns, "sandboxtemplates");
  auto made = co_await CreateUnlessExists(api, ns, templates, template_json,
                                          "creating SandboxTemplate " + name);
  if (!made.ok()) co_return made.status();
  const std::string pools = Collection(kExtensions, ns, "sandboxwarmpools");
  const std::string pool = SandboxWarmPoolJson(name, replicas);
  auto pool_made =
      co_await CreateUnlessExists(api, ns, pools, pool, "creating SandboxWarmPool " + name);
  if (!pool_made.ok()) co_return pool_made.status();
  if (*pool_made || !set_replicas) co_return Status();
  const std::string path = pools + "/" + name;
  const std::string patch = R"({"spec":{"replicas":)" + std::to_string(replicas) + "}}";
  auto r = co_await api.Request("PATCH", path, patch);
  if (!r.ok()) co_return r.status().Context("sizing SandboxWarmPool " + name);
  if (!r->ok()) co_return CreateRefused("sizing SandboxWarmPool " + name, ns, *r);
  co_return Status();
}

asio::awaitable<Result<ClaimedSandbox>> ClaimSandbox(
    ApiClient& api, std::string ns, std::string claim_json, std::chrono::milliseconds timeout,
    std::function<void(const std::string&)> on_created) {
  const std::string claims = Collection(kExtensions, ns, "sandboxclaims");
  const std::string what = "creating a SandboxClaim in namespace " + ns;
  auto r = co_await api.Request("POST", claims, claim_json);
  if (!r.ok()) co_return r.status().Context(what);
  if (!r->ok()) co_return CreateRefused(what, ns, *r);
  rapidjson::Document created;
  std::string why;
  if (!ParseJson(r->body, created, why)) co_return Status::Error(what + ": the answer: " + why);
  ClaimedSandbox out;
  out.claim = Str(Member(&created, "metadata"), "name");
  if (out.claim.empty()) co_return Status::Error(what + ": the answer names no claim");
  if (on_created) on_created(out.claim);

  const auto deadline = std::chrono::steady_clock::now() + timeout;
  WatchedObject claim{
      .collection = claims,
      .name = out.claim,
      .noun = "SandboxClaim",
      .goal = "bound to a sandbox",
      .timeout_reason = "sandbox claim",
      .gone = Status::Gone("SandboxClaim " + out.claim + " was deleted before it was bound")};
  auto bound = std::make_shared<std::string>();
  JudgeObject judge_claim = [bound](const Value& object) {
    ObjectVerdict v = ClaimVerdict(object);
    if (v.decided && v.decided->ok()) {
      *bound = Str(Member(Member(&object, "status"), "sandbox"), "name");
    }
    return v;
  };
  const std::string rv = ResourceVersionOf(created);
  Status s = co_await WatchUntil(api, std::move(claim), rv, timeout, std::move(judge_claim));
  if (s.ok()) {
    // Bound; the sandbox's pod once the controller has made it (the pod's own state is the
    // caller's to watch: a pull failure is named there).
    out.sandbox = *bound;
    WatchedObject sandbox{
        .collection = Collection(kSandboxes, ns, "sandboxes"),
        .name = out.sandbox,
        .noun = "Sandbox",
        .goal = "given a pod",
        .timeout_reason = "sandbox claim",
        .gone = Status::Gone("Sandbox " + out.sandbox + " was deleted before it had a pod")};
    auto pod = std::make_shared<std::string>();
    JudgeObject judge_sandbox = [pod](const Value& object) {
      ObjectVerdict v = SandboxVerdict(object);
      if (v.decided && v.decided->ok()) *pod = SandboxPodName(object);
      return v;
    };
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    const std::string from_a_get;
    s = co_await WatchUntil(api, std::move(sandbox), from_a_get,
                            std::max(left, std::chrono::milliseconds(1)), std::move(judge_sandbox));
    out.pod = *pod;
  }
  if (s.ok()) co_return out;
  Status deleted = co_await DeleteSandboxClaim(api, ns, out.claim, std::chrono::seconds(30));
  (void)deleted;  // its shutdownTime removes it otherwise
  co_return s;
}

asio::awaitable<ReapResult> ReapClaims(ApiClient& api, std::string ns, const ReapRequest& request) {
  ReapResult result;
  const std::string claims = Collection(kExtensions, ns, "sandboxclaims");
  const std::string what = "listing SandboxClaims to reap in " + ns;
  auto listed =
      co_await api.Request("GET", claims + "?labelSelector=" + kAppLabel + "%3D" + kAppValue, "");
  if (!listed.ok()) {
    result.errors.push_back(listed.status().Context(what).message());
    co_return result;
  }
  if (listed->status == 404) co_return result;  // no agent-sandbox extensions (yet)
  if (!listed->ok()) {
    result.errors.push_back(ApiError(what, *listed).message());
    co_return result;
  }
  rapidjson::Document d;
  std::string why;
  if (!ParseJson(listed->body, d, why)) {
    result.errors.push_back(what + ": " + why);
    co_return result;
  }
  for (const ReapDecision& doomed : PodsToReap(d, request)) {
    auto r = co_await api.Request("DELETE", claims + "/" + doomed.name, kClaimDeleteOptions);
    if (!r.ok()) {
      result.errors.push_back(r.status().Context("deleting SandboxClaim " + doomed.name).message());
    } else if (r->ok()) {
      result.deleted.push_back(doomed);
    } else if (r->status != 404) {
      result.errors.push_back(ApiError("deleting SandboxClaim " + doomed.name, *r).message());
    }
  }
  co_return result;
}

asio::awaitable<Status> DeleteSandboxClaim(ApiClient& api, std::string ns, std::string name,
                                           std::chrono::milliseconds confirm_timeout) {
  const std::string claims = Collection(kExtensions, ns, "sandboxclaims");
  const std::string path = claims + "/" + name;
  auto r = co_await api.Request("DELETE", path, kClaimDeleteOptions);
  if (!r.ok()) co_return r.status().Context("deleting SandboxClaim " + name);
  if (r->status == 404) co_return Status();
  if (!r->ok()) co_return ApiError("deleting SandboxClaim " + name, *r);
  // Foreground: the claim goes once its sandbox and the sandbox's pod have gone.
  WatchedObject claim{.collection = claims,
                      .name = name,
                      .noun = "SandboxClaim",
                      .goal = "gone (with its sandbox and pod)",
                      .timeout_reason = "sandbox deletion",
                      .gone = Status()};
  JudgeObject waiting = [](const Value&) { return ObjectVerdict{std::nullopt, "deleting"}; };
  const std::string from_a_get;
  co_return co_await WatchUntil(api, std::move(claim), from_a_get, confirm_timeout,
                                std::move(waiting));
}

}  // namespace ci::k8s
