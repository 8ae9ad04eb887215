// k8s/pod_lifecycle.h against the fake API server (tests/k8s/fake_apiserver.py): pods made by
// PodJson really created, watched until they run, refused (quota, RBAC, namespace), failing on
// the fake's failure images, deleted and reaped. Needs root (the fake's pods).
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/await.h"
#include "core/json.h"
#include "core/policies.h"
#include "k8s/fake_apiserver.h"
#include "k8s/kube_config.h"
#include "k8s/pod_lifecycle.h"
#include "k8s/pod_spec.h"

namespace ci::k8s {
namespace {

using testing_support::AwaitOn;
using testing_support::FakeApiServer;
using namespace std::chrono_literals;

constexpr char kNs[] = "default";
constexpr char kInstance[] = "ci-test-1";

// A pod whose only container is not `executor`: phase Running, but never ReadPodState's
// kRunning, so a wait on it ends only by deletion or timeout.
constexpr char kNoExecutorPod[] = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1"},
  "spec":{"restartPolicy":"Never","terminationGracePeriodSeconds":0,
  "containers":[{"name":"runner","image":"executor:latest","command":["sleep","3600"]}]}})";

struct PodWish {
  std::string image = "code-interpreter-executor:latest";
  PodKind kind = PodKind::kExecution;
  std::string instance = kInstance;
  int64_t expires_at = 0;  // 0: what PodOptionsFor computes
};

// The executor's pod body: PodJson from a default spec, as Prepare will make it.
std::string PodBody(const PodWish& w) {
  SandboxSpec spec;
  spec.env = DefaultSandboxEnv();
  spec.security.seccomp_profile_json = std::string(*EmbeddedPolicy("seccomp-executor"));
  spec.security.seccomp_profile_name = "default";
  K8sOptions options;
  options.image = w.image;
  options.agent_path = testing_support::kFakeImageAgent;
  PodRequest request;
  request.now = time(nullptr);
  request.instance_id = w.instance;
  request.owner_description = "pod_lifecycle_fake_test";
  request.daemon_namespace = kNs;
  PodOptions o = PodOptionsFor(options, spec, request);
  o.kind = w.kind;
  if (w.expires_at != 0) o.expires_at = w.expires_at;
  return PodJson(spec, o);
}

class PodLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the fake API server's pods need root";
  }

  std::unique_ptr<ApiClient> Client(const FakeApiServer& fake) {
    return fake.Client(io_.get_executor());
  }

  CreatedPod Create(ApiClient& api, const std::string& body) {
    auto created = AwaitOn(io_, CreatePod(api, kNs, body));
    EXPECT_TRUE(created.ok()) << created.status().message();
    return created.ok() ? created.value() : CreatedPod{};
  }

  // Creates an executor pod with `image` and waits for it (60 s).
  Status CreateAndWait(ApiClient& api, const std::string& image, CreatedPod& pod) {
    PodWish w;
    w.image = image;
    pod = Create(api, PodBody(w));
    return AwaitOn(io_, WaitRunning(api, kNs, pod.name, pod.resource_version, 60s));
  }

  int GetStatus(ApiClient& api, const std::string& name) {
    const std::string path = std::string("/api/v1/namespaces/") + kNs + "/pods/" + name;
    auto got = AwaitOn(io_, api.Request("GET", path, ""));
    EXPECT_TRUE(got.ok()) << got.status().message();
    return got.ok() ? got->status : 0;
  }

  asio::io_context io_;
};

TEST_F(PodLifecycleTest, CreatesAPodWaitsUntilItRunsAndDeletesIt) {
  FakeApiServer fake;
  auto api = Client(fake);
  CreatedPod pod = Create(*api, PodBody({}));
  EXPECT_EQ(pod.name.rfind("ci-exec-", 0), 0u) << pod.name;
  EXPECT_FALSE(pod.uid.empty());
  EXPECT_FALSE(pod.resource_version.empty());
  Status running = AwaitOn(io_, WaitRunning(*api, kNs, pod.name, pod.resource_version, 60s));
  ASSERT_TRUE(running.ok()) << running.message();
  // Without a resourceVersion the wait starts from a GET, which already sees it running.
  Status again = AwaitOn(io_, WaitRunning(*api, kNs, pod.name, "", 60s));
  EXPECT_TRUE(again.ok()) << again.message();

  Status deleted = AwaitOn(io_, DeletePod(*api, kNs, pod.name, 10s));
  ASSERT_TRUE(deleted.ok()) << deleted.message();
  EXPECT_EQ(GetStatus(*api, pod.name), 404);
  // Deleting what is gone is success.
  Status twice = AwaitOn(io_, DeletePod(*api, kNs, pod.name, 10s));
  EXPECT_TRUE(twice.ok()) << twice.message();
}

TEST_F(PodLifecycleTest, AnImageThatCannotBePulledFailsWithoutWaitingForTheTimeout) {
  FakeApiServer fake;
  auto api = Client(fake);
  CreatedPod pod;
  Status s = CreateAndWait(*api, "registry.local/ci/executor:pull-fails", pod);
  ASSERT_FALSE(s.ok());
  EXPECT_FALSE(s.unavailable()) << s.message();  // not the timeout: the kubelet's verdict
  EXPECT_FALSE(s.gone());
  EXPECT_TRUE(s.message().find("ErrImagePull") != std::string::npos ||
              s.message().find("ImagePullBackOff") != std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("pod " + pod.name), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("image registry.local/ci/executor:pull-fails"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("check KUBERNETES_EXECUTOR_IMAGE"), std::string::npos) << s.message();
}

TEST_F(PodLifecycleTest, AnUnschedulablePodIsUnavailable) {
  FakeApiServer fake;
  auto api = Client(fake);
  CreatedPod pod;
  Status s = CreateAndWait(*api, "registry.local/ci/executor:unschedulable", pod);
  ASSERT_TRUE(s.unavailable()) << (s.ok() ? "ok" : s.message());
  EXPECT_EQ(s.unavailable_reason(), "scheduling");
  EXPECT_NE(s.message().find("Insufficient cpu"), std::string::npos) << s.message();
}

TEST_F(PodLifecycleTest, AFullQuotaIsUnavailable) {
  FakeApiServer fake({"--max-pods", "1"});
  auto api = Client(fake);
  Create(*api, PodBody({}));
  auto second = AwaitOn(io_, CreatePod(*api, kNs, PodBody({})));
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(second.status().unavailable()) << second.status().message();
  EXPECT_EQ(second.status().unavailable_reason(), "quota");
  EXPECT_NE(second.status().message().find("exceeded quota"), std::string::npos)
      << second.status().message();
}

TEST_F(PodLifecycleTest, RefusedCreatesSayWhatToFix) {
  FakeApiServer fake({"--deny", "create:pods"});
  auto api = Client(fake);
  auto denied = AwaitOn(io_, CreatePod(*api, kNs, PodBody({})));
  ASSERT_FALSE(denied.ok());
  const Status& s = denied.status();
  EXPECT_FALSE(s.unavailable()) << s.message();
  EXPECT_NE(s.message().find("cannot create resource \"pods\""), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("(HTTP 403, reason Forbidden)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("packaging/kubernetes"), std::string::npos) << s.message();
}

TEST_F(PodLifecycleTest, AMissingNamespaceNamesTheVariable) {
  FakeApiServer fake;
  auto api = Client(fake);
  auto missing = AwaitOn(io_, CreatePod(*api, "nowhere", PodBody({})));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("namespaces \"nowhere\" not found"), std::string::npos)
      << missing.status().message();
  EXPECT_NE(missing.status().message().find("KUBERNETES_EXECUTOR_NAMESPACE"), std::string::npos)
      << missing.status().message();
}

TEST_F(PodLifecycleTest, AWaitEndsGoneWhenThePodIsDeletedMeanwhile) {
  FakeApiServer fake;
  auto api = Client(fake);
  CreatedPod pod = Create(*api, kNoExecutorPod);
  std::optional<Status> waited, deleted;
  asio::co_spawn(
      io_,
      [&]() -> asio::awaitable<void> {
        waited = co_await WaitRunning(*api, kNs, pod.name, pod.resource_version, 60s);
      },
      asio::detached);
  asio::co_spawn(
      io_,
      [&]() -> asio::awaitable<void> { deleted = co_await DeletePod(*api, kNs, pod.name, 10s); },
      asio::detached);
  io_.restart();  // the AwaitOn before left it stopped
  io_.run();
  ASSERT_TRUE(deleted && waited);
  EXPECT_TRUE(deleted->ok()) << deleted->message();
  ASSERT_FALSE(waited->ok());
  EXPECT_TRUE(waited->gone()) << waited->message();
}

TEST_F(PodLifecycleTest, AWaitThatRunsOutIsUnavailableWithTheLastState) {
  FakeApiServer fake;
  auto api = Client(fake);
  CreatedPod pod = Create(*api, kNoExecutorPod);
  Status s = AwaitOn(io_, WaitRunning(*api, kNs, pod.name, pod.resource_version, 1500ms));
  ASSERT_TRUE(s.unavailable()) << (s.ok() ? "ok" : s.message());
  EXPECT_EQ(s.unavailable_reason(), "pod start");
  EXPECT_NE(s.message().find("pod p1 not Running after 2 s: phase "), std::string::npos)
      << s.message();
}

TEST_F(PodLifecycleTest, AnExpiredResourceVersionRestartsFromAFreshGet) {
  // One event of history: by the time pod b runs, a's creation is long compacted away.
  FakeApiServer fake({"--watch-history", "1"});
  auto api = Client(fake);
  CreatedPod a = Create(*api, PodBody({}));
  CreatedPod b = Create(*api, PodBody({}));
  Status b_running = AwaitOn(io_, WaitRunning(*api, kNs, b.name, "", 60s));
  ASSERT_TRUE(b_running.ok()) << b_running.message();
  Status a_running = AwaitOn(io_, WaitRunning(*api, kNs, a.name, a.resource_version, 60s));
  EXPECT_TRUE(a_running.ok()) << a_running.message();
}

TEST_F(PodLifecycleTest, TheReaperRemovesExpiredAndLeftoverPodsButNotAnotherReplicasSession) {
  FakeApiServer fake;
  auto api = Client(fake);
  const int64_t now = time(nullptr);
  PodWish expired;
  expired.instance = "ci-other";
  expired.kind = PodKind::kSession;
  expired.expires_at = now - 60;
  PodWish leftover;  // ours, from "before" this run started (started_at below is later)
  PodWish session;   // another replica's, live
  session.instance = "ci-other";
  session.kind = PodKind::kSession;
  session.expires_at = now + 3600;
  PodWish other_replica;
  other_replica.instance = "ci-other";
  const std::string expired_name = Create(*api, PodBody(expired)).name;
  const std::string leftover_name = Create(*api, PodBody(leftover)).name;
  const std::string session_name = Create(*api, PodBody(session)).name;
  const std::string other_name = Create(*api, PodBody(other_replica)).name;

  ReapResult r = AwaitOn(io_, ReapPods(*api, kNs, ReapRequest{kInstance, now + 5, now, nullptr}));
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  std::vector<std::string> want = {expired_name, leftover_name};
  std::sort(want.begin(), want.end());
  std::vector<std::string> deleted;
  for (const auto& d : r.deleted) deleted.push_back(d.name);
  std::sort(deleted.begin(), deleted.end());
  EXPECT_EQ(deleted, want);
  EXPECT_EQ(GetStatus(*api, expired_name), 404);
  EXPECT_EQ(GetStatus(*api, leftover_name), 404);
  EXPECT_EQ(GetStatus(*api, session_name), 200);
  EXPECT_EQ(GetStatus(*api, other_name), 200);
  // Nothing left to do: a second round deletes nothing.
  ReapResult again =
      AwaitOn(io_, ReapPods(*api, kNs, ReapRequest{kInstance, now + 5, now, nullptr}));
  EXPECT_TRUE(again.deleted.empty());
  EXPECT_TRUE(again.errors.empty());
}

}  // namespace
}  // namespace ci::k8s
