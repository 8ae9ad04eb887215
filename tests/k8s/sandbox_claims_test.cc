// The agent-sandbox documents and the claim's verdict (src/k8s/sandbox_claims.h), pure.
#include "k8s/sandbox_claims.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/json.h"
#include "k8s/pod_fields.h"

namespace ci::k8s {
namespace {

using ::testing::HasSubstr;

rapidjson::Document Parse(const std::string& text) {
  rapidjson::Document d;
  std::string why;
  EXPECT_TRUE(ParseJson(text, d, why)) << why << ": " << text;
  return d;
}

std::string Claim(const std::string& status) {
  return R"({"metadata":{"name":"ci-claim-x"},"status":)" + status + "}";
}

TEST(SandboxClaims, TemplateCarriesThePodsMetadataAndSpec) {
  const std::string pod =
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"ci-executor-",)"
      R"("labels":{"app":"code-interpreter","component":"executor"},)"
      R"("annotations":{"code-interpreter/kind":"execution"}},)"
      R"("spec":{"containers":[{"name":"executor","stdin":true}]}})";
  auto t = SandboxTemplateJson("code-interpreter-abc", pod);
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto d = Parse(*t);
  EXPECT_EQ(Str(&d, "apiVersion"), "extensions.agents.x-k8s.io/v1beta1");
  EXPECT_EQ(Str(&d, "kind"), "SandboxTemplate");
  EXPECT_EQ(Str(Member(&d, "metadata"), "name"), "code-interpreter-abc");
  const auto* spec = Member(&d, "spec");
  EXPECT_EQ(Str(spec, "networkPolicyManagement"), "Unmanaged");
  const auto* pod_template = Member(spec, "podTemplate");
  EXPECT_EQ(Str(Member(Member(pod_template, "metadata"), "labels"), "component"), "executor");
  EXPECT_EQ(Str(Member(Member(pod_template, "metadata"), "annotations"), "code-interpreter/kind"),
            "execution");
  auto containers = Items(Member(pod_template, "spec"), "containers");
  ASSERT_EQ(containers.size(), 1u);
  EXPECT_EQ(Str(containers[0], "name"), "executor");
  // No generateName in a template: the controller names the pods after their sandboxes.
  EXPECT_EQ(t->find("generateName"), std::string::npos);
  EXPECT_FALSE(SandboxTemplateJson("x", "not json").ok());
}

TEST(SandboxClaims, PoolAndClaimDocuments) {
  auto pool = Parse(SandboxWarmPoolJson("code-interpreter-abc", 3));
  EXPECT_EQ(Str(&pool, "kind"), "SandboxWarmPool");
  EXPECT_EQ(Member(Member(&pool, "spec"), "replicas")->GetUint64(), 3u);
  EXPECT_EQ(Str(Member(Member(&pool, "spec"), "sandboxTemplateRef"), "name"),
            "code-interpreter-abc");

  ClaimRequest r;
  r.pool = "code-interpreter-abc";
  r.instance_id = "host-123";
  r.owner_description = "host h, pid 123";
  r.shutdown_at = 1796601600;  // 2026-12-07T00:00:00Z
  auto claim = Parse(SandboxClaimJson(r));
  EXPECT_EQ(Str(&claim, "kind"), "SandboxClaim");
  EXPECT_EQ(Str(Member(&claim, "metadata"), "generateName"), "ci-claim-");
  EXPECT_EQ(Str(Member(Member(&claim, "metadata"), "labels"), "code-interpreter.owner"),
            "host-123");
  const auto* spec = Member(&claim, "spec");
  EXPECT_EQ(Str(Member(spec, "warmPoolRef"), "name"), "code-interpreter-abc");
  EXPECT_EQ(Str(Member(spec, "lifecycle"), "shutdownTime"), "2026-12-07T00:00:00Z");
  EXPECT_EQ(Str(Member(spec, "lifecycle"), "shutdownPolicy"), "Delete");
  EXPECT_EQ(SandboxPoolName("abc"), "code-interpreter-abc");
}

TEST(SandboxClaims, ClaimVerdictWaitsUntilItIsBound) {
  auto none = Parse(Claim("{}"));
  ObjectVerdict v = ClaimVerdict(none);
  EXPECT_FALSE(v.decided);
  EXPECT_THAT(v.state, HasSubstr("agent-sandbox controller"));

  auto pending = Parse(Claim(R"({"conditions":[{"type":"Ready","status":"False",)"
                             R"("reason":"SandboxCreatePending","message":"m"}]})"));
  v = ClaimVerdict(pending);
  EXPECT_FALSE(v.decided);
  EXPECT_EQ(v.state, "not bound to a sandbox yet, Ready False (SandboxCreatePending): m");

  // Bound, ready or not: the pod's own start is watched next.
  auto bound = Parse(Claim(R"({"sandbox":{"name":"pool-abcde"},)"
                           R"("conditions":[{"type":"Ready","status":"False"}]})"));
  v = ClaimVerdict(bound);
  ASSERT_TRUE(v.decided);
  EXPECT_TRUE(v.decided->ok());
}

TEST(SandboxClaims, SandboxVerdictWaitsForItsPod) {
  auto none = Parse(R"({"metadata":{"name":"s"},"status":{"conditions":[{"type":"Ready",)"
                    R"("status":"False","reason":"ReconcilerError","message":"quota"}]}})");
  ObjectVerdict v = SandboxVerdict(none);
  EXPECT_FALSE(v.decided);
  EXPECT_EQ(v.state, "no pod yet, Ready False (ReconcilerError): quota");
  auto annotated =
      Parse(R"({"metadata":{"name":"s","annotations":{"agents.x-k8s.io/pod-name":"p"}}})");
  v = SandboxVerdict(annotated);
  ASSERT_TRUE(v.decided);
  EXPECT_TRUE(v.decided->ok());
  auto ready = Parse(R"({"metadata":{"name":"s"},"status":{"conditions":[{"type":"Ready",)"
                     R"("status":"True"}]}})");
  EXPECT_TRUE(SandboxVerdict(ready).decided);
}

TEST(SandboxClaims, VerdictEndsOnReasonsWaitingCannotChange) {
  for (const char* reason : {"WarmPoolNotFound", "TemplateNotFound", "ClaimExpired"}) {
    auto d = Parse(Claim(std::string(R"({"conditions":[{"type":"Ready","status":"False",)") +
                         R"("reason":")" + reason + R"(","message":"m"}]})"));
    ObjectVerdict v = ClaimVerdict(d);
    ASSERT_TRUE(v.decided) << reason;
    EXPECT_FALSE(v.decided->ok());
    EXPECT_THAT(v.decided->message(), HasSubstr(reason));
    EXPECT_THAT(v.decided->message(), HasSubstr("ci-claim-x"));
  }
  auto deleting = Parse(R"({"metadata":{"name":"c","deletionTimestamp":"2026-12-07T00:00:00Z"}})");
  ObjectVerdict v = ClaimVerdict(deleting);
  ASSERT_TRUE(v.decided);
  EXPECT_TRUE(v.decided->gone());
}

TEST(SandboxClaims, PodOfASandbox) {
  auto annotated =
      Parse(R"({"metadata":{"name":"s","annotations":{"agents.x-k8s.io/pod-name":"p"}}})");
  EXPECT_EQ(SandboxPodName(annotated), "p");
  auto plain = Parse(R"({"metadata":{"name":"s"}})");
  EXPECT_EQ(SandboxPodName(plain), "s");
}

}  // namespace
}  // namespace ci::k8s
