// The shared warm pool's pure parts: its key, which pods a list offers, the claim's patch.
#include "k8s/shared_pool.h"

#include <gtest/gtest.h>

#include "core/json.h"

namespace ci::k8s {
namespace {

rapidjson::Document List(const std::string& items) {
  rapidjson::Document d;
  std::string why;
  EXPECT_TRUE(ParseJson(R"({"kind":"PodList","items":[)" + items + "]}", d, why)) << why;
  return d;
}

std::string Pod(const std::string& name, const std::string& phase, int64_t expires,
                const std::string& extra_meta = "", const std::string& extra_labels = "") {
  return R"({"metadata":{"name":")" + name + R"(","resourceVersion":"7",)" + extra_meta +
         R"("labels":{"code-interpreter.expires-at":")" + std::to_string(expires) + "\"" +
         extra_labels + R"(}},"status":{"phase":")" + phase + R"("}})";
}

TEST(SharedPool, KeyIsAStableLabelValueOfThePod) {
  const std::string key = PoolKey(R"({"kind":"Pod"})");
  EXPECT_EQ(key.size(), 20u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(PoolKey(R"({"kind":"Pod"})"), key);
  EXPECT_NE(PoolKey(R"({"kind":"Pod","x":1})"), key);
}

TEST(SharedPool, ListsTheUnclaimedPodsOfItsKey) {
  EXPECT_EQ(FreePoolPodsPath("ns", "abc"),
            "/api/v1/namespaces/ns/pods?labelSelector=app%3Dcode-interpreter%2C"
            "code-interpreter.pool%3Dabc%2C%21code-interpreter.claimed-by");
}

TEST(SharedPool, OffersRunningPodsFirstAndSkipsWhatCannotServe) {
  auto d =
      List(Pod("c-pending", "Pending", 2000) + "," + Pod("b-running", "Running", 2000) + "," +
           Pod("a-running", "Running", 2000) + "," + Pod("soon", "Running", 1500) + "," +
           Pod("deleting", "Running", 2000, R"("deletionTimestamp":"2026-01-01T00:00:00Z",)") +
           "," + Pod("claimed", "Running", 2000, "", R"(,"code-interpreter.claimed-by":"r1")") +
           "," + Pod("failed", "Failed", 2000) + "," + Pod("done", "Succeeded", 2000));
  PoolPods pods = PoolPodsFrom(d, 1500);
  std::vector<std::string> names;
  for (const auto& p : pods.free) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a-running", "b-running", "c-pending"}));
  EXPECT_EQ(pods.free[0].resource_version, "7");
  EXPECT_EQ(pods.free[0].expires_at, 2000);
  EXPECT_TRUE(pods.free[0].running);
  EXPECT_FALSE(pods.free[2].running);
  EXPECT_EQ(pods.ended, (std::vector<std::string>{"failed", "done"}));
}

TEST(SharedPool, TheClaimIsAMergePatchWithThePreconditionAndTheNewOwner) {
  EXPECT_EQ(ClaimPatchJson("42", "replica-a", "pod replica-a"),
            R"({"metadata":{"resourceVersion":"42","labels":{"code-interpreter.claimed-by":)"
            R"("replica-a","code-interpreter.owner":"replica-a"},"annotations":)"
            R"({"code-interpreter/owner":"pod replica-a"}}})");
}

}  // namespace
}  // namespace ci::k8s
