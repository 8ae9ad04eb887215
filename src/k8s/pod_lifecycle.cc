#include "k8s/pod_lifecycle.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "core/json.h"
#include "core/rfc3339.h"
#include "k8s/object_watch.h"
#include "k8s/pod_fields.h"
#include "k8s/pod_spec.h"

namespace ci::k8s {
namespace {

namespace asio = boost::asio;
using rapidjson::Value;
using Clock = std::chrono::steady_clock;

// A DELETE that removes the object at once: the query for servers that read only that, the body
// for the rest; Background: nothing owned by a pod, but no orphaning either.
constexpr char kDeleteOptions[] =
    R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0,)"
    R"("propagationPolicy":"Background"})";

std::string PodNameOf(const Value& pod) {
  std::string name = Str(Member(&pod, "metadata"), "name");
  return name.empty() ? "(unnamed)" : name;
}

// The image the spec asks for (what the operator configured), else the one the status reports.
std::string ImageOf(const Value& pod, const Value* status, const std::string& container) {
  const Value* spec = Member(&pod, "spec");
  for (const char* list : {"containers", "initContainers"}) {
    for (const Value* c : Items(spec, list)) {
      if (Str(c, "name") == container) return Str(c, "image");
    }
  }
  return Str(status, "image");
}

// PID 1 of the executor container when it is the agent (the only container that reads its
// stdin, pod_spec.h), else empty.
std::string AgentOf(const Value& pod) {
  for (const Value* c : Items(Member(&pod, "spec"), "containers")) {
    const Value* stdin_open = Member(c, "stdin");
    if (Str(c, "name") != kExecutorContainer || stdin_open == nullptr || !stdin_open->IsBool() ||
        !stdin_open->GetBool()) {
      continue;
    }
    const std::vector<const Value*> command = Items(c, "command");
    if (!command.empty() && command.front()->IsString()) return command.front()->GetString();
  }
  return "";
}

bool IsFailedWaiting(const std::string& reason) {
  static const char* const kReasons[] = {
      "ErrImagePull",         "ImagePullBackOff",  "InvalidImageName",
      "ErrImageNeverPull",    "ImageInspectError", "CreateContainerConfigError",
      "CreateContainerError", "RunContainerError",
  };
  return std::find(std::begin(kReasons), std::end(kReasons), reason) != std::end(kReasons);
}

// What to do about a container that cannot start, by the kubelet's reason.
std::string WaitingHint(const std::string& reason, bool init) {
  const std::string image_var =
      init ? "KUBERNETES_EXECUTOR_LOCKDOWN_IMAGE" : "KUBERNETES_EXECUTOR_IMAGE";
  if (reason == "ErrImagePull" || reason == "ImagePullBackOff" || reason == "ImageInspectError") {
    return "check " + image_var +
           " and the image pull secrets (KUBERNETES_EXECUTOR_IMAGE_PULL_SECRETS): the node "
           "cannot pull it";
  }
  if (reason == "InvalidImageName") return image_var + " is not a valid image reference";
  if (reason == "ErrImageNeverPull") {
    return "the image is not on the node and KUBERNETES_EXECUTOR_IMAGE_PULL_POLICY is Never: "
           "load it on the nodes or allow pulls";
  }
  if (reason == "CreateContainerConfigError") {
    return "the kubelet cannot build the container's configuration (a security context the "
           "image does not allow, such as runAsNonRoot with a root image user; a missing "
           "Secret or ConfigMap)";
  }
  return "the container runtime refused the container: check the image, "
         "KUBERNETES_EXECUTOR_RUNTIME_CLASS and KUBERNETES_EXECUTOR_SECCOMP_PROFILE (the "
         "profile must exist on the node)";
}

// "container executor (image x): <reason>[: <message>]"
std::string ContainerWords(const std::string& kind, const std::string& name,
                           const std::string& image, const std::string& reason,
                           const std::string& message) {
  std::string out = kind + " " + name + " (image " + image + "): " + reason;
  if (!message.empty()) out += ": " + message;
  return out;
}

std::string TerminatedWords(const Value* terminated) {
  std::string out = "exit code ";
  const Value* code = Member(terminated, "exitCode");
  out += code != nullptr && code->IsInt() ? std::to_string(code->GetInt()) : "?";
  const std::string reason = Str(terminated, "reason"), message = Str(terminated, "message");
  if (!reason.empty()) out += ", reason " + reason;
  if (!message.empty()) out += ": " + message;
  return out;
}

int TerminatedCode(const Value* terminated) {
  const Value* code = Member(terminated, "exitCode");
  return code != nullptr && code->IsInt() ? code->GetInt() : -1;
}

PodState Failed(std::string message) { return {PodStateKind::kFailed, std::move(message)}; }

// A pod that ended: the phase's reason and message (DeadlineExceeded, Evicted, ...) and the
// executor container's end.
PodState Ended(const Value& pod, const Value* status, const std::string& phase) {
  const std::string name = PodNameOf(pod);
  std::string out = "pod " + name + " (image " + ImageOf(pod, nullptr, kExecutorContainer) +
                    ") ended before it could run code: phase " + phase;
  const std::string reason = Str(status, "reason"), message = Str(status, "message");
  if (!reason.empty()) out += ", reason " + reason;
  if (!message.empty()) out += ": " + message;
  for (const Value* c : Items(status, "containerStatuses")) {
    const Value* terminated = Member(Member(c, "state"), "terminated");
    if (Str(c, "name") == kExecutorContainer && terminated != nullptr) {
      out.append("; container executor: ").append(TerminatedWords(terminated));
    }
  }
  if (reason == "DeadlineExceeded") {
    out += "; its activeDeadlineSeconds passed before it ran (slow scheduling or image pulls)";
  } else if (reason == "Evicted") {
    out += "; the node evicted it (memory or disk pressure): retry";
  } else if (const std::string agent = AgentOf(pod); !agent.empty()) {
    out += "; its PID 1, the agent " + agent + ", exited: the image needs the agent there " +
           "(KUBERNETES_EXECUTOR_AGENT_PATH; the executor image has it), or set " +
           "KUBERNETES_EXECUTOR_AGENT=false to drive pods of this image by execs (kubectl " +
           "describe pod " + name + " shows the node's events)";
  } else {
    out += "; its PID 1 exited: the image needs /bin/sh and sleep (kubectl describe pod " + name +
           " shows the node's events)";
  }
  return Failed(out);
}

// kFailed from a container that cannot start or ended, else nullopt.
std::optional<PodState> ContainerFailure(const Value& pod, const Value* c, bool init) {
  const std::string pod_name = PodNameOf(pod);
  const std::string name = Str(c, "name");
  const std::string image = ImageOf(pod, c, name);
  const Value* state = Member(c, "state");
  const std::string kind = init ? "init container" : "container";
  if (const Value* waiting = Member(state, "waiting"); waiting != nullptr) {
    const std::string reason = Str(waiting, "reason");
    if (!IsFailedWaiting(reason)) return std::nullopt;
    return Failed("pod " + pod_name + ": " +
                  ContainerWords(kind, name, image, reason, Str(waiting, "message")) +
                  " (it cannot start); " + WaitingHint(reason, init));
  }
  const Value* terminated = Member(state, "terminated");
  if (terminated == nullptr) return std::nullopt;
  if (init && TerminatedCode(terminated) != 0) {
    std::string out = "pod " + pod_name + ": " + kind + " " + name + " (image " + image +
                      ") failed: " + TerminatedWords(terminated);
    if (name == kLockdownContainer) {
      out +=
          "; it runs iptables as root with NET_ADMIN: KUBERNETES_EXECUTOR_LOCKDOWN_IMAGE needs "
          "iptables, or set KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN=false and rely on the "
          "NetworkPolicy";
    }
    return Failed(out);
  }
  if (!init && name == kExecutorContainer) {
    return Failed("pod " + pod_name + ": " + kind + " " + name + " (image " + image +
                  ") exited before it could run code: " + TerminatedWords(terminated) +
                  "; its PID 1 is /bin/sh running sleep: the image needs both");
  }
  return std::nullopt;
}

// "phase Pending, init network-lockdown: running, executor: waiting (ContainerCreating)"
std::string Describe(const Value* status) {
  std::string phase = Str(status, "phase");
  std::string out = "phase " + (phase.empty() ? std::string("(none yet)") : phase);
  for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
    for (const Value* c : Items(status, list)) {
      out += std::string(", ") + (list[0] == 'i' ? "init " : "") + Str(c, "name") + ": ";
      const Value* state = Member(c, "state");
      if (const Value* w = Member(state, "waiting"); w != nullptr) {
        out += "waiting";
        if (!Str(w, "reason").empty()) out.append(" (").append(Str(w, "reason")).append(")");
      } else if (Member(state, "running") != nullptr) {
        out += "running";
      } else if (const Value* t = Member(state, "terminated"); t != nullptr) {
        out.append("terminated (").append(TerminatedWords(t)).append(")");
      } else {
        out += "no state";
      }
    }
  }
  return out;
}

std::string PodPath(const std::string& ns, const std::string& name) {
  return "/api/v1/namespaces/" + ns + "/pods/" + name;
}

Status Gone(const std::string& name) {
  return Status::Gone("pod " + name +
                      " was deleted before it ran (by the reaper, an operator, or its "
                      "namespace's deletion)");
}

// The outcome of one state: a Status when decided, nullopt to wait on.
std::optional<Status> Decide(const PodState& s, const std::string& name) {
  switch (s.kind) {
    case PodStateKind::kRunning:
      return Status();
    case PodStateKind::kFailed:
      return Status::Error(s.message);
    case PodStateKind::kUnschedulable:
      return Status::Unavailable("scheduling", s.message);
    case PodStateKind::kDeleting:
      return Status::Gone("pod " + name + " is being deleted before it ran: " + s.message);
    case PodStateKind::kPending:
      return std::nullopt;
  }
  return std::nullopt;
}

// The DELETE itself: the deleted object's uid ("" when it was not there).
asio::awaitable<Result<std::string>> DeleteOnce(ApiClient& api, const std::string& ns,
                                                const std::string& name) {
  const std::string path = PodPath(ns, name) + "?gracePeriodSeconds=0";
  auto r = co_await api.Request("DELETE", path, kDeleteOptions);
  if (!r.ok()) co_return r.status().Context("deleting pod " + name);
  if (r->status == 404) co_return std::string();
  if (!r->ok()) co_return ApiError("deleting pod " + name, *r);
  rapidjson::Document d;
  std::string why;
  if (!ParseJson(r->body, d, why)) co_return std::string();
  co_return Str(Member(&d, "metadata"), "uid");
}

bool ParseInt64(const std::string& s, int64_t& out) {
  if (s.empty() || s.size() > 18) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}

}  // namespace

PodState ReadPodState(const Value& pod) {
  const std::string name = PodNameOf(pod);
  const Value* meta = Member(&pod, "metadata");
  const Value* status = Member(&pod, "status");
  if (!Str(meta, "deletionTimestamp").empty()) {
    return {PodStateKind::kDeleting,
            std::string("deletion requested at ") + Str(meta, "deletionTimestamp")};
  }
  const std::string phase = Str(status, "phase");
  if (phase == "Failed" || phase == "Succeeded") return Ended(pod, status, phase);
  for (const Value* c : Items(status, "initContainerStatuses")) {
    if (auto f = ContainerFailure(pod, c, true)) return *f;
  }
  bool executor_running = false;
  for (const Value* c : Items(status, "containerStatuses")) {
    if (auto f = ContainerFailure(pod, c, false)) return *f;
    if (Str(c, "name") == kExecutorContainer && Member(Member(c, "state"), "running") != nullptr) {
      executor_running = true;
    }
  }
  for (const Value* cond : Items(status, "conditions")) {
    if (Str(cond, "type") == "PodScheduled" && Str(cond, "status") == "False" &&
        Str(cond, "reason") == "Unschedulable") {
      return {PodStateKind::kUnschedulable,
              "pod " + name + " (image " + ImageOf(pod, nullptr, kExecutorContainer) +
                  ") cannot be scheduled: " + Str(cond, "message") +
                  "; no node can take it now: retry later, add capacity, or check its memory "
                  "and CPU requests, KUBERNETES_EXECUTOR_NODE_SELECTOR, "
                  "KUBERNETES_EXECUTOR_TOLERATIONS and KUBERNETES_EXECUTOR_RUNTIME_CLASS"};
    }
  }
  if (phase == "Running" && executor_running) {
    return {PodStateKind::kRunning, Describe(status)};
  }
  return {PodStateKind::kPending, Describe(status)};
}

asio::awaitable<Result<CreatedPod>> CreatePod(ApiClient& api, std::string_view ns_view,
                                              std::string_view json_body) {
  const std::string ns(ns_view);
  const std::string path = "/api/v1/namespaces/" + ns + "/pods";
  const std::string what = "creating an executor pod in namespace " + ns;
  auto r = co_await api.Request("POST", path, json_body);
  if (!r.ok()) co_return r.status().Context(what);
  if (r->ok()) {
    rapidjson::Document d;
    std::string why;
    if (!ParseJson(r->body, d, why)) co_return Status::Error(what + ": the answer: " + why);
    const Value* meta = Member(&d, "metadata");
    CreatedPod c{Str(meta, "name"), Str(meta, "uid"), Str(meta, "resourceVersion")};
    if (c.name.empty()) co_return Status::Error(what + ": the answer names no pod");
    co_return c;
  }
  const std::string refused = ApiError(what, *r).message();
  if (r->status == 403 && refused.find("exceeded quota") != std::string::npos) {
    co_return Status::Unavailable(
        "quota", refused + "; the namespace's ResourceQuota is used up: retry later, or raise it");
  }
  if (r->status == 403 && refused.find("PodSecurity") != std::string::npos) {
    co_return Status::Error(
        refused +
        "; the namespace enforces a Pod Security level the pod does not meet: with "
        "KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN=true the init container needs NET_ADMIN "
        "(not allowed by `restricted`): set it false, or label the namespace baseline");
  }
  if (r->status == 403) {
    co_return Status::Error(refused +
                            "; the daemon's service account may not create pods there: apply "
                            "the Role and RoleBinding of packaging/kubernetes (role.yaml) in "
                            "KUBERNETES_EXECUTOR_NAMESPACE");
  }
  if (r->status == 404) {
    co_return Status::Error(refused +
                            "; set KUBERNETES_EXECUTOR_NAMESPACE to a namespace that "
                            "exists (now '" +
                            ns + "')");
  }
  if (r->status == 422) {
    co_return Status::Error(refused +
                            "; the API server refused the pod as invalid: the fields it names "
                            "come from the KUBERNETES_EXECUTOR_* options (image, node "
                            "selector, tolerations, classes, pull secrets)");
  }
  if (r->status == 429) {
    co_return Status::Unavailable("kubernetes API", refused + "; the API server asks to slow down");
  }
  co_return Status::Error(refused);
}

asio::awaitable<Status> WaitRunning(ApiClient& api, std::string_view ns, std::string_view name,
                                    std::string_view resource_version,
                                    std::chrono::milliseconds timeout) {
  WatchedObject pod{.collection = "/api/v1/namespaces/" + std::string(ns) + "/pods",
                    .name = std::string(name),
                    .noun = "pod",
                    .goal = "Running",
                    .timeout_reason = "pod start",
                    .gone = Gone(std::string(name))};
  JudgeObject judge = [name = pod.name](const Value& object) {
    PodState state = ReadPodState(object);
    return ObjectVerdict{Decide(state, name), std::move(state.message)};
  };
  const std::string rv(resource_version);
  co_return co_await WatchUntil(api, std::move(pod), rv, timeout, std::move(judge));
}

asio::awaitable<Status> DeletePod(ApiClient& api, std::string_view ns_view,
                                  std::string_view name_view,
                                  std::chrono::milliseconds confirm_timeout) {
  const std::string ns(ns_view), name(name_view);
  const std::string retry = "; the reaper will retry";
  auto deleted = co_await DeleteOnce(api, ns, name);
  if (!deleted.ok()) co_return Status::Error(deleted.status().message() + retry);
  const auto deadline = Clock::now() + confirm_timeout;
  auto got = co_await api.Request("GET", PodPath(ns, name), "");
  if (!got.ok()) co_return Status::Error(got.status().message() + retry);
  if (got->status == 404) co_return Status();
  if (!got->ok()) co_return Status::Error(ApiError("reading pod " + name, *got).message() + retry);
  rapidjson::Document d;
  std::string why;
  if (!ParseJson(got->body, d, why)) co_return Status::Error("pod " + name + ": " + why + retry);
  const std::string uid = Str(Member(&d, "metadata"), "uid");
  if (!deleted->empty() && uid != *deleted) co_return Status();  // another pod, same name
  const std::string still = "pod " + name + " still exists " +
                            std::to_string(confirm_timeout.count()) + " ms after its deletion (" +
                            Describe(Member(&d, "status")) + ")" + retry;
  // A finalizer or a kubelet confirming: wait for its DELETED event.
  const auto remaining = deadline - Clock::now();
  if (remaining <= Clock::duration::zero()) co_return Status::Error(still);
  const std::string path = ObjectWatchPath("/api/v1/namespaces/" + ns + "/pods", name,
                                           ResourceVersionOf(d), CeilSeconds(remaining));
  auto watch =
      co_await api.Watch(path, std::chrono::duration_cast<std::chrono::milliseconds>(remaining));
  if (!watch.ok()) co_return Status::Error(watch.status().message() + retry);
  for (;;) {
    auto line = co_await (*watch)->Next();
    if (!line.ok() || !line->has_value()) co_return Status::Error(still);
    rapidjson::Document ev;
    if (!ParseJson(**line, ev, why) || !ev.IsObject()) continue;
    if (Str(&ev, "type") == "DELETED") co_return Status();
  }
}

std::string ReapListPath(std::string_view ns) {
  // labelSelector=app=code-interpreter,component in (executor,session)
  return "/api/v1/namespaces/" + std::string(ns) + "/pods?labelSelector=" + kAppLabel + "%3D" +
         kAppValue + "%2C" + kComponentLabel + "%20in%20%28executor%2Csession%29";
}

std::vector<ReapDecision> PodsToReap(const Value& pod_list, const ReapRequest& req) {
  std::vector<ReapDecision> out;
  for (const Value* pod : Items(&pod_list, "items")) {
    const Value* meta = Member(pod, "metadata");
    const Value* labels = Member(meta, "labels");
    const std::string name = Str(meta, "name");
    if (name.empty()) continue;
    const bool ours = !req.instance_id.empty() && Str(labels, kOwnerLabel) == req.instance_id;
    int64_t expires = 0;
    if (ParseInt64(Str(labels, kExpiresLabel), expires) && expires < req.now_unix) {
      out.push_back({name, "expired at " + Rfc3339(expires)});
      continue;
    }
    const std::string phase = Str(Member(pod, "status"), "phase");
    if (ours && (phase == "Succeeded" || phase == "Failed")) {
      out.push_back({name, "finished (phase " + phase + ")"});
      continue;
    }
    if (Str(labels, kComponentLabel) == "session" &&
        Str(Member(meta, "annotations"), kOutlivesDaemonAnnotation) == "true") {
      continue;  // another replica may be serving it
    }
    const int64_t created = ParseRfc3339(Str(meta, "creationTimestamp"));
    const std::string owner = Str(labels, kOwnerLabel);
    if (ours && created >= 0 && created < req.started_at_unix) {
      out.push_back({name, "left by an earlier run of instance " + req.instance_id + " (created " +
                               Rfc3339(created) + ", before this start at " +
                               Rfc3339(req.started_at_unix) + ")"});
    } else if (!ours && !owner.empty() && req.owner_gone && req.owner_gone(owner)) {
      out.push_back({name, "left by daemon " + owner + ", which is gone"});
    }
  }
  return out;
}

asio::awaitable<ReapResult> ReapPods(ApiClient& api, std::string_view ns_view,
                                     const ReapRequest& request) {
  const std::string ns(ns_view);
  ReapResult result;
  const std::string path = ReapListPath(ns);
  auto listed = co_await api.Request("GET", path, "");
  if (!listed.ok()) {
    result.errors.push_back(listed.status().Context("listing pods to reap in " + ns).message());
    co_return result;
  }
  if (!listed->ok()) {
    result.errors.push_back(ApiError("listing pods to reap in " + ns, *listed).message());
    co_return result;
  }
  rapidjson::Document d;
  std::string why;
  if (!ParseJson(listed->body, d, why)) {
    result.errors.push_back("listing pods to reap in " + ns + ": " + why);
    co_return result;
  }
  for (const ReapDecision& doomed : PodsToReap(d, request)) {
    auto deleted = co_await DeleteOnce(api, ns, doomed.name);
    if (!deleted.ok()) {
      result.errors.push_back(deleted.status().message() + " (" + doomed.reason + ")");
    } else if (!deleted->empty()) {
      result.deleted.push_back(doomed);
    }
  }
  co_return result;
}

}  // namespace ci::k8s
