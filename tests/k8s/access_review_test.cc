// The access review's body and the reading of its answer (src/k8s/access_review.h); the reviews
// against a server are in api_client_test.cc.
#include "k8s/access_review.h"

#include <gtest/gtest.h>

#include "core/json.h"

namespace ci::k8s {
namespace {

TEST(AccessReview, TheBodyAsksForOneVerbOnOneSubresource) {
  rapidjson::Document d;
  std::string why;
  ASSERT_TRUE(ParseJson(AccessReviewJson("sandboxes", "get", "pods", "attach"), d, why)) << why;
  EXPECT_STREQ(d["apiVersion"].GetString(), "authorization.k8s.io/v1");
  EXPECT_STREQ(d["kind"].GetString(), "SelfSubjectAccessReview");
  const auto& attrs = d["spec"]["resourceAttributes"];
  EXPECT_STREQ(attrs["namespace"].GetString(), "sandboxes");
  EXPECT_STREQ(attrs["verb"].GetString(), "get");
  EXPECT_STREQ(attrs["resource"].GetString(), "pods");
  EXPECT_STREQ(attrs["subresource"].GetString(), "attach");
}

TEST(AccessReview, OnlyAnExplicitAllowedIsAYes) {
  const std::string review = R"({"kind":"SelfSubjectAccessReview","status":)";
  EXPECT_TRUE(*ReadAccessReview(review + R"({"allowed":true,"reason":"RBAC"}})"));
  EXPECT_FALSE(*ReadAccessReview(review + R"({"allowed":false}})"));
  EXPECT_FALSE(*ReadAccessReview(review + R"({"allowed":false,"denied":true}})"));
  EXPECT_FALSE(*ReadAccessReview(review + R"({}})"));
  EXPECT_FALSE(*ReadAccessReview(review + R"({"allowed":"true"}})"));
  EXPECT_FALSE(ReadAccessReview(R"({"kind":"Status","status":"Failure"})").ok());
  EXPECT_FALSE(ReadAccessReview("<html>").ok());
}

}  // namespace
}  // namespace ci::k8s
