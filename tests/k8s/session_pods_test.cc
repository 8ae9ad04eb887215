// Session pods (k8s/session_pods.h): which pods of a PodList are sessions any replica may serve,
// the label values a session id may be, and the selector sent.
#include "k8s/session_pods.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/json.h"

namespace ci::k8s {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr double kSessionsNow = 1764590000;

struct PodShape {
  std::string name = "ci-session-abcde";
  std::string id = "code-session-0123456789abcdef0123456789abcdef";
  std::string phase = "Running";
  bool deleting = false;
  std::string created = "1764589000.5";
  std::string expires = "1764590900.5";
  std::string token = "00ff";
};

std::string PodItem(const PodShape& p) {
  std::string annotations = R"("code-interpreter/session-created-at":")" + p.created +
                            R"(","code-interpreter/session-expires-at":")" + p.expires + "\"";
  if (!p.token.empty()) annotations += R"(,"code-interpreter/session-token":")" + p.token + "\"";
  return R"({"metadata":{"name":")" + p.name + "\"" +
         (p.deleting ? R"(,"deletionTimestamp":"2025-12-01T12:00:00Z")" : "") +
         R"(,"labels":{"app":"code-interpreter","component":"session","code-interpreter.session":")" +
         p.id + R"("},"annotations":{)" + annotations + R"(}},"status":{"phase":")" + p.phase +
         R"("}})";
}

std::vector<SessionPod> From(const std::vector<PodShape>& pods) {
  std::string list = R"({"kind":"PodList","items":[)";
  for (size_t i = 0; i < pods.size(); ++i) {
    if (i > 0) list += ',';  // appended: `"," + string&&` trips GCC 12 -Werror=restrict
    list += PodItem(pods[i]);
  }
  list += "]}";
  rapidjson::Document d;
  std::string why;
  EXPECT_TRUE(ParseJson(list, d, why)) << why;
  return SessionPodsFrom(d, kSessionsNow);
}

std::vector<std::string> Names(const std::vector<SessionPod>& pods) {
  std::vector<std::string> out;
  for (const auto& p : pods) out.push_back(p.name);
  return out;
}

TEST(SessionPodsFrom, ReadsTheIdentityAndTokenExactly) {
  auto pods = From({PodShape{}});
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0].name, "ci-session-abcde");
  EXPECT_EQ(pods[0].identity.id, "code-session-0123456789abcdef0123456789abcdef");
  EXPECT_EQ(pods[0].identity.created_at, 1764589000.5);
  EXPECT_EQ(pods[0].identity.expires_at, 1764590900.5);
  EXPECT_EQ(pods[0].token, "00ff");
}

TEST(SessionPodsFrom, EndingOrForeignPodsAreNoSessions) {
  PodShape deleting, pending, failed, expired, no_token, bad_time, bad_id, ok;
  deleting.name = "deleting", deleting.deleting = true;
  pending.name = "pending", pending.phase = "Pending";
  failed.name = "failed", failed.phase = "Failed";
  expired.name = "expired", expired.expires = "1764589999";
  no_token.name = "no-token", no_token.token = "";
  bad_time.name = "bad-time", bad_time.created = "yesterday";
  bad_id.name = "bad-id", bad_id.id = "Not_A_Session";
  ok.name = "ok";
  EXPECT_THAT(Names(From({deleting, pending, failed, expired, no_token, bad_time, bad_id, ok})),
              ElementsAre("ok"));
}

TEST(IsSessionLabelValue, OnlyWhatALabelValueAndASessionIdCanBe) {
  EXPECT_TRUE(IsSessionLabelValue("code-session-0123456789abcdef0123456789abcdef"));
  EXPECT_TRUE(IsSessionLabelValue("a"));
  for (const char* bad : {"", "-a", "a-", "A", "a_b", "a.b", "a%2Cb", "a,b", "a b", "a=b"}) {
    EXPECT_FALSE(IsSessionLabelValue(bad)) << bad;
  }
  EXPECT_TRUE(IsSessionLabelValue(std::string(63, 'a')));
  EXPECT_FALSE(IsSessionLabelValue(std::string(64, 'a')));
}

TEST(SessionPodsPath, SelectsSessionPodsURLEncoded) {
  EXPECT_EQ(
      SessionPodsPath("ns", ""),
      "/api/v1/namespaces/ns/pods?labelSelector=app%3Dcode-interpreter%2Ccomponent%3Dsession");
  EXPECT_EQ(SessionPodsPath("ns", "code-session-ab"),
            "/api/v1/namespaces/ns/pods?labelSelector=app%3Dcode-interpreter%2Ccomponent%3Dsession"
            "%2Ccode-interpreter.session%3Dcode-session-ab");
}

TEST(SessionPodsFrom, AnEmptyListHasNone) { EXPECT_THAT(From({}), IsEmpty()); }

// A claim (agent-sandbox) carries a session pod's metadata; its status names the sandbox.
TEST(SessionClaimsFrom, BoundClaimsAreSessionsInTheirSandboxes) {
  PodShape bound, unbound, deleting, expired;
  bound.name = "ci-claim-a";
  unbound.name = "ci-claim-b";
  deleting.name = "ci-claim-c", deleting.deleting = true;
  expired.name = "ci-claim-d", expired.expires = "1764589999";
  auto claim = [](const PodShape& p, const std::string& sandbox) {
    std::string item = PodItem(p);
    // A claim has no phase: its status is the sandbox it is bound to.
    const std::string phase = R"("status":{"phase":")" + p.phase + R"("}})";
    item.replace(item.find(phase), phase.size(),
                 sandbox.empty() ? std::string(R"("status":{}})")
                                 : R"("status":{"sandbox":{"name":")" + sandbox + R"("}}})");
    return item;
  };
  const std::string list = R"({"kind":"SandboxClaimList","items":[)" + claim(bound, "pool-x") +
                           "," + claim(unbound, "") + "," + claim(deleting, "pool-y") + "," +
                           claim(expired, "pool-z") + "]}";
  rapidjson::Document d;
  std::string why;
  ASSERT_TRUE(ParseJson(list, d, why)) << why;
  auto sessions = SessionClaimsFrom(d, kSessionsNow);
  ASSERT_EQ(sessions.size(), 1u);
  EXPECT_EQ(sessions[0].claim, "ci-claim-a");
  EXPECT_EQ(sessions[0].name, "pool-x");
  EXPECT_EQ(sessions[0].token, "00ff");
  EXPECT_EQ(sessions[0].identity.id, bound.id);
  EXPECT_EQ(SessionClaimsPath("ns", "s"),
            "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/ns/sandboxclaims?labelSelector="
            "app%3Dcode-interpreter%2Ccomponent%3Dsession%2Ccode-interpreter.session%3Ds");
}

}  // namespace
}  // namespace ci::k8s
