// The pure halves of k8s/pod_lifecycle.h: ReadPodState on Pod objects as a GET or a watch event
// carries them (the status shapes the kubelet writes), PodsToReap on PodLists, the reaper's
// selector and RFC 3339 times.
#include "k8s/pod_lifecycle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/json.h"
#include "core/rfc3339.h"
#include "k8s/pod_spec.h"

namespace ci::k8s {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A pod named ci-exec-x1 whose executor runs `image`, with the given `status` JSON; `init` adds
// the network-lockdown init container and `meta_extra` metadata members.
std::string PodText(const std::string& status, const std::string& image = "reg.local/exec:1",
                    bool init = false, const std::string& meta_extra = "") {
  std::string spec = R"("containers":[{"name":"executor","image":")" + image + R"("}])";
  if (init) spec += R"(,"initContainers":[{"name":"network-lockdown","image":"reg.local/lock:2"}])";
  return R"({"kind":"Pod","apiVersion":"v1","metadata":{"name":"ci-exec-x1")" + meta_extra +
         R"(},"spec":{)" + spec + R"(},"status":)" + status + "}";
}

PodState State(const std::string& text) {
  rapidjson::Document d;
  std::string why;
  EXPECT_TRUE(ParseJson(text, d, why)) << why << "\n" << text;
  return ReadPodState(d);
}

std::string Waiting(const std::string& reason, const std::string& message) {
  return R"({"phase":"Pending","conditions":[{"type":"PodScheduled","status":"True"}],)"
         R"("containerStatuses":[{"name":"executor","image":"reg.local/exec:1","ready":false,)"
         R"("state":{"waiting":{"reason":")" +
         reason + R"(","message":")" + message + R"("}}}]})";
}

TEST(ReadPodState, RunningOnlyWhenTheExecutorContainerRuns) {
  PodState s = State(PodText(R"({"phase":"Running","containerStatuses":[
      {"name":"executor","state":{"running":{"startedAt":"2026-12-01T10:00:00Z"}}}]})"));
  EXPECT_EQ(s.kind, PodStateKind::kRunning) << s.message;
  // Phase Running is not enough: the container is the one exec enters.
  PodState other = State(PodText(R"({"phase":"Running","containerStatuses":[
      {"name":"sidecar","state":{"running":{}}}]})"));
  EXPECT_EQ(other.kind, PodStateKind::kPending) << other.message;
  PodState not_yet = State(PodText(R"({"phase":"Pending","containerStatuses":[
      {"name":"executor","state":{"running":{}}}]})"));
  EXPECT_EQ(not_yet.kind, PodStateKind::kPending) << not_yet.message;
}

TEST(ReadPodState, PendingSaysWhereItStands) {
  PodState fresh = State(PodText("{}"));
  EXPECT_EQ(fresh.kind, PodStateKind::kPending);
  EXPECT_EQ(fresh.message, "phase (none yet)");
  PodState creating = State(PodText(Waiting("ContainerCreating", "")));
  EXPECT_EQ(creating.kind, PodStateKind::kPending);
  EXPECT_EQ(creating.message, "phase Pending, executor: waiting (ContainerCreating)");
  // The init container running is still pending (the lockdown runs before the executor).
  PodState init = State(PodText(R"({"phase":"Pending","initContainerStatuses":[
      {"name":"network-lockdown","state":{"running":{}}}],"containerStatuses":[
      {"name":"executor","state":{"waiting":{"reason":"PodInitializing"}}}]})",
                                "reg.local/exec:1", true));
  EXPECT_EQ(init.kind, PodStateKind::kPending);
  EXPECT_EQ(init.message,
            "phase Pending, init network-lockdown: running, executor: waiting (PodInitializing)");
}

struct WaitingCase {
  const char* reason;
  const char* hint;  // a part of what the message says to do
};

void PrintTo(const WaitingCase& c, std::ostream* os) { *os << c.reason; }

class FailedWaiting : public ::testing::TestWithParam<WaitingCase> {};

TEST_P(FailedWaiting, FailsNamingThePodTheImageTheKubeletAndTheFix) {
  const WaitingCase& c = GetParam();
  PodState s = State(PodText(Waiting(c.reason, "the kubelet's words")));
  ASSERT_EQ(s.kind, PodStateKind::kFailed) << c.reason;
  EXPECT_THAT(s.message, HasSubstr("pod ci-exec-x1"));
  EXPECT_THAT(s.message, HasSubstr("container executor (image reg.local/exec:1)"));
  EXPECT_THAT(s.message, HasSubstr(std::string(c.reason) + ": the kubelet's words"));
  EXPECT_THAT(s.message, HasSubstr(c.hint));
}

INSTANTIATE_TEST_SUITE_P(
    EveryReason, FailedWaiting,
    ::testing::Values(
        WaitingCase{"ErrImagePull",
                    "check KUBERNETES_EXECUTOR_IMAGE and the image pull secrets "
                    "(KUBERNETES_EXECUTOR_IMAGE_PULL_SECRETS)"},
        WaitingCase{"ImagePullBackOff", "check KUBERNETES_EXECUTOR_IMAGE and the image pull"},
        WaitingCase{"InvalidImageName", "KUBERNETES_EXECUTOR_IMAGE is not a valid image"},
        WaitingCase{"ErrImageNeverPull", "KUBERNETES_EXECUTOR_IMAGE_PULL_POLICY is Never"},
        WaitingCase{"ImageInspectError", "check KUBERNETES_EXECUTOR_IMAGE"},
        WaitingCase{"CreateContainerConfigError", "runAsNonRoot"},
        WaitingCase{"CreateContainerError", "KUBERNETES_EXECUTOR_RUNTIME_CLASS"},
        WaitingCase{"RunContainerError", "KUBERNETES_EXECUTOR_SECCOMP_PROFILE"}),
    [](const auto& info) { return std::string(info.param.reason); });

TEST(ReadPodState, OtherWaitingReasonsKeepWaiting) {
  for (const char* reason : {"ContainerCreating", "PodInitializing", "SomethingNew"}) {
    EXPECT_EQ(State(PodText(Waiting(reason, "x"))).kind, PodStateKind::kPending) << reason;
  }
}

TEST(ReadPodState, AnInitContainerThatCannotPullNamesTheLockdownImage) {
  PodState s = State(PodText(R"({"phase":"Pending","initContainerStatuses":[
      {"name":"network-lockdown","state":{"waiting":{"reason":"ImagePullBackOff",
       "message":"Back-off pulling image \"reg.local/lock:2\""}}}]})",
                             "reg.local/exec:1", true));
  ASSERT_EQ(s.kind, PodStateKind::kFailed);
  EXPECT_THAT(s.message, HasSubstr("init container network-lockdown (image reg.local/lock:2)"));
  EXPECT_THAT(s.message, HasSubstr("KUBERNETES_EXECUTOR_LOCKDOWN_IMAGE"));
}

TEST(ReadPodState, TheLockdownExitingNonZeroFails) {
  PodState s = State(PodText(R"({"phase":"Pending","initContainerStatuses":[
      {"name":"network-lockdown","state":{"terminated":{"exitCode":127,"reason":"Error",
       "message":"iptables: not found"}}}]})",
                             "reg.local/exec:1", true));
  ASSERT_EQ(s.kind, PodStateKind::kFailed);
  EXPECT_THAT(s.message, HasSubstr("pod ci-exec-x1: init container network-lockdown (image "
                                   "reg.local/lock:2) failed: exit code 127, reason Error: "
                                   "iptables: not found"));
  EXPECT_THAT(s.message, HasSubstr("KUBERNETES_EXECUTOR_NET_ADMIN_LOCKDOWN=false"));
  // Exit 0 is the lockdown done: the executor starts next.
  PodState done = State(PodText(R"({"phase":"Pending","initContainerStatuses":[
      {"name":"network-lockdown","state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]})",
                                "reg.local/exec:1", true));
  EXPECT_EQ(done.kind, PodStateKind::kPending) << done.message;
}

TEST(ReadPodState, AnEndedPodFailsWithThePhasesReason) {
  PodState deadline = State(PodText(R"({"phase":"Failed","reason":"DeadlineExceeded",
      "message":"Pod was active on the node longer than the specified deadline"})"));
  ASSERT_EQ(deadline.kind, PodStateKind::kFailed);
  EXPECT_THAT(deadline.message,
              HasSubstr("pod ci-exec-x1 (image reg.local/exec:1) ended before it could run "
                        "code: phase Failed, reason DeadlineExceeded: Pod was active on the node "
                        "longer than the specified deadline"));
  EXPECT_THAT(deadline.message, HasSubstr("activeDeadlineSeconds"));
  PodState done = State(PodText(R"({"phase":"Succeeded","containerStatuses":[
      {"name":"executor","state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]})"));
  ASSERT_EQ(done.kind, PodStateKind::kFailed);
  EXPECT_THAT(done.message,
              HasSubstr("phase Succeeded; container executor: exit code 0, reason Completed"));
  // The executor ended while the phase still says Running (the kubelet's next update is late).
  PodState exited = State(PodText(R"({"phase":"Running","containerStatuses":[
      {"name":"executor","state":{"terminated":{"exitCode":128,"reason":"StartError",
       "message":"exec: \"/bin/sh\": no such file"}}}]})"));
  ASSERT_EQ(exited.kind, PodStateKind::kFailed);
  EXPECT_THAT(exited.message, HasSubstr("exit code 128, reason StartError"));
}

// An image without the agent (KUBERNETES_EXECUTOR_AGENT): the message says what to change.
TEST(ReadPodState, AnAgentThatCannotStartNamesTheSetting) {
  std::string pod = PodText(R"({"phase":"Failed","containerStatuses":[
      {"name":"executor","state":{"terminated":{"exitCode":128,"reason":"StartError",
       "message":"exec: \"/usr/local/lib/code-interpreter/agent\": no such file"}}}]})");
  const std::string plain = R"("containers":[{"name":"executor","image":"reg.local/exec:1"}])";
  const std::string agent = R"("containers":[{"name":"executor","image":"reg.local/exec:1",)"
                            R"("command":["/usr/local/lib/code-interpreter/agent"],"stdin":true}])";
  ASSERT_NE(pod.find(plain), std::string::npos);
  EXPECT_THAT(State(pod).message, HasSubstr("the image needs /bin/sh and sleep"));
  pod.replace(pod.find(plain), plain.size(), agent);
  PodState failed = State(pod);
  ASSERT_EQ(failed.kind, PodStateKind::kFailed);
  EXPECT_THAT(failed.message,
              HasSubstr("its PID 1, the agent /usr/local/lib/code-interpreter/agent, exited: the "
                        "image needs the agent there (KUBERNETES_EXECUTOR_AGENT_PATH; the "
                        "executor image has it), or set KUBERNETES_EXECUTOR_AGENT=false"));
}

TEST(ReadPodState, UnschedulableCarriesTheSchedulersMessage) {
  PodState s = State(PodText(R"({"phase":"Pending","conditions":[{"type":"PodScheduled",
      "status":"False","reason":"Unschedulable","message":"0/3 nodes are available: 3 Insufficient memory."}]})"));
  ASSERT_EQ(s.kind, PodStateKind::kUnschedulable);
  EXPECT_THAT(s.message, HasSubstr("pod ci-exec-x1 (image reg.local/exec:1) cannot be scheduled: "
                                   "0/3 nodes are available: 3 Insufficient memory."));
  EXPECT_THAT(s.message, HasSubstr("KUBERNETES_EXECUTOR_NODE_SELECTOR"));
  // Not scheduled yet, without a verdict: waiting.
  EXPECT_EQ(State(PodText(R"({"phase":"Pending","conditions":[{"type":"PodScheduled",
      "status":"False","reason":"SchedulerError"}]})"))
                .kind,
            PodStateKind::kPending);
}

TEST(ReadPodState, ADeletionTimestampIsDeleting) {
  PodState s =
      State(PodText(R"({"phase":"Running","containerStatuses":[
      {"name":"executor","state":{"running":{}}}]})",
                    "reg.local/exec:1", false, R"(,"deletionTimestamp":"2026-12-01T10:00:00Z")"));
  EXPECT_EQ(s.kind, PodStateKind::kDeleting);
}

// -- the reaper's decision ----------------------------------------------------------------------

constexpr int64_t kStarted = 1764590000;  // 2025-12-01T11:53:20Z
constexpr int64_t kLifecycleNow = kStarted + 600;

std::string Item(const std::string& name, const std::string& component, const std::string& owner,
                 int64_t expires, int64_t created, const std::string& phase = "Running") {
  return R"({"metadata":{"name":")" + name + R"(","creationTimestamp":")" + Rfc3339(created) +
         R"(","labels":{"app":"code-interpreter","component":")" + component +
         R"(","code-interpreter.owner":")" + owner + R"(","code-interpreter.expires-at":")" +
         std::to_string(expires) + R"("}},"status":{"phase":")" + phase + R"("}})";
}

std::vector<std::string> Reaped(const std::vector<std::string>& items,
                                std::vector<std::string>* reasons = nullptr) {
  std::string list = R"({"kind":"PodList","items":[)";
  for (size_t i = 0; i < items.size(); ++i) list += (i ? "," : "") + items[i];
  list += "]}";
  rapidjson::Document d;
  std::string why;
  EXPECT_TRUE(ParseJson(list, d, why)) << why;
  std::vector<std::string> names;
  // "host-7" is a daemon that is gone, as owner_gone would find a dead pid of this host.
  ReapRequest request{"ci-me", kStarted, kLifecycleNow,
                      [](std::string_view o) { return o == "host-7"; }};
  for (const ReapDecision& r : PodsToReap(d, request)) {
    names.push_back(r.name);
    if (reasons) reasons->push_back(r.reason);
  }
  return names;
}

TEST(PodsToReap, ExpiredPodsGoWhoeverOwnsThem) {
  std::vector<std::string> reasons;
  EXPECT_THAT(
      Reaped({Item("old-session", "session", "ci-other", kLifecycleNow - 1, kStarted + 10),
              Item("live-session", "session", "ci-other", kLifecycleNow + 60, kStarted + 10),
              Item("just-now", "executor", "ci-me", kLifecycleNow, kStarted + 10)},
             &reasons),
      ElementsAre("old-session"));
  EXPECT_THAT(reasons, ElementsAre(std::string("expired at ") + Rfc3339(kLifecycleNow - 1)));
}

TEST(PodsToReap, PodsOfADaemonThatIsGone) {
  std::vector<std::string> reasons;
  EXPECT_THAT(
      Reaped({Item("prev-exec", "executor", "ci-me", kLifecycleNow + 60, kStarted - 5),
              // Its interpreter lived on the exec connection of the daemon that is gone.
              Item("prev-session", "session", "ci-me", kLifecycleNow + 60, kStarted - 5),
              Item("dead-session", "session", "host-7", kLifecycleNow + 60, kStarted + 5),
              // Another live replica's pods, and ours from this run.
              Item("other-exec", "executor", "ci-other", kLifecycleNow + 60, kStarted - 5),
              Item("other-session", "session", "ci-other", kLifecycleNow + 60, kStarted - 5),
              Item("this-run", "executor", "ci-me", kLifecycleNow + 60, kStarted)},
             &reasons),
      ElementsAre("prev-exec", "prev-session", "dead-session"));
  ASSERT_EQ(reasons.size(), 3u);
  EXPECT_THAT(reasons[0], HasSubstr("left by an earlier run of instance ci-me"));
  EXPECT_EQ(reasons[2], "left by daemon host-7, which is gone");
}

// A session pod made to outlive its daemon (KUBERNETES_SESSIONS_OUTLIVE_DAEMON of the replica
// that made it, whatever this one's): another replica serves it; only its expiry or its end (a
// finished phase) removes it.
std::string Outliving(std::string item) {
  const std::string labels = R"("labels":)";
  item.insert(item.find(labels), R"("annotations":{"code-interpreter/outlives-daemon":"true"},)");
  return item;
}

TEST(PodsToReap, SessionsThatOutliveTheirDaemonGoOnlyWhenExpiredOrFinished) {
  EXPECT_THAT(
      Reaped(
          {Outliving(Item("prev-session", "session", "ci-me", kLifecycleNow + 60, kStarted - 5)),
           Outliving(Item("dead-session", "session", "host-7", kLifecycleNow + 60, kStarted + 5)),
           Outliving(Item("old-session", "session", "host-7", kLifecycleNow - 1, kStarted + 5)),
           Outliving(Item("ended", "session", "ci-me", kLifecycleNow + 60, kStarted + 1, "Failed")),
           // The annotation does not spare an execution pod, nor does another value.
           Outliving(Item("dead-exec", "executor", "host-7", kLifecycleNow + 60, kStarted + 5)),
           Item("plain-session", "session", "host-7", kLifecycleNow + 60, kStarted + 5)}),
      ElementsAre("old-session", "ended", "dead-exec", "plain-session"));
}

TEST(PodsToReap, FinishedPodsOfOursOnly) {
  EXPECT_THAT(
      Reaped({Item("done", "session", "ci-me", kLifecycleNow + 60, kStarted + 1, "Succeeded"),
              Item("failed", "executor", "ci-me", kLifecycleNow + 60, kStarted + 1, "Failed"),
              Item("theirs", "executor", "ci-other", kLifecycleNow + 60, kStarted + 1, "Failed"),
              Item("running", "executor", "ci-me", kLifecycleNow + 60, kStarted + 1)}),
      ElementsAre("done", "failed"));
}

TEST(PodsToReap, PodsWithoutUsableLabelsAreLeftAlone) {
  EXPECT_THAT(Reaped({R"({"metadata":{"name":"bare"}})",
                      R"({"metadata":{"name":"odd","labels":{"code-interpreter.expires-at":"soon",
                          "component":"executor"}}})"}),
              IsEmpty());
  // No instance id: nothing is "ours".
  rapidjson::Document d;
  std::string why;
  ASSERT_TRUE(ParseJson(std::string("{\"items\":[") +
                            Item("x", "executor", "", kLifecycleNow + 60, kStarted - 5, "Failed") +
                            "]}",
                        d, why));
  EXPECT_THAT(PodsToReap(d, ReapRequest{"", kStarted, kLifecycleNow, nullptr}), IsEmpty());
}

TEST(ReapListPath, SelectsOurPodsURLEncoded) {
  EXPECT_EQ(ReapListPath("sandboxes"),
            "/api/v1/namespaces/sandboxes/pods?labelSelector=app%3Dcode-interpreter%2C"
            "component%20in%20%28executor%2Csession%29");
}

TEST(ParseRfc3339, MetavOneTimes) {
  EXPECT_EQ(ParseRfc3339("2023-11-14T22:13:20Z"), 1700000000);
  EXPECT_EQ(ParseRfc3339("2023-11-14T22:13:20.123456Z"), 1700000000);
  EXPECT_EQ(ParseRfc3339("2023-11-14T23:13:20+01:00"), 1700000000);
  EXPECT_EQ(ParseRfc3339(Rfc3339(kStarted)), kStarted);
  EXPECT_EQ(ParseRfc3339(""), -1);
  EXPECT_EQ(ParseRfc3339("2023-11-14 22:13:20Z"), -1);
  EXPECT_EQ(ParseRfc3339("2023-11-14T22:13:20"), -1);
}

}  // namespace
}  // namespace ci::k8s
