// The E2B control plane's requests (daemon/e2b/control_requests.h): defaults, every refusal
// naming its field, and the list query as the JS SDK encodes it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "daemon/e2b/control_requests.h"

namespace ci::daemon::e2b {
namespace {

using ::testing::HasSubstr;

TEST(E2bNewSandbox, TakesTheSdksBodyWithDefaults) {
  auto r = ParseNewSandbox(R"({"templateID":"code-interpreter-v1","secure":true})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->template_id, "code-interpreter-v1");
  EXPECT_EQ(r->timeout_sec, kDefaultTimeoutSec);
  r = ParseNewSandbox(
      R"({"templateID":"base","timeout":60,"metadata":{"a":"b"},"envVars":{"X_1":"y"},)"
      R"("autoPause":false,"allow_internet_access":false,"network":{},"volumeMounts":[]})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->timeout_sec, 60);
  EXPECT_EQ(r->metadata.at("a"), "b");
  EXPECT_EQ(r->env_vars.at("X_1"), "y");
  EXPECT_EQ(r->network.allow_internet_access, false);
  EXPECT_FALSE(r->network.allow_out.has_value());
}

TEST(E2bNewSandbox, TakesTheNetworkOptions) {
  auto r = ParseNewSandbox(
      R"({"templateID":"base","network":{"allowOut":["pypi.org","1.2.3.4"],"denyOut":)"
      R"(["0.0.0.0/0"],"allowPublicTraffic":null}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r->network.allow_out, (std::vector<std::string>{"pypi.org", "1.2.3.4"}));
  EXPECT_EQ(*r->network.deny_out, std::vector<std::string>{"0.0.0.0/0"});
  // An update (the SDK's updateNetwork) has them at the top level.
  auto update = ParseNetworkUpdate(R"({"allow_internet_access":true,"allowOut":["a.org"]})");
  ASSERT_TRUE(update.ok()) << update.status().message();
  EXPECT_EQ(update->allow_internet_access, true);
  EXPECT_EQ(*update->allow_out, std::vector<std::string>{"a.org"});
  EXPECT_FALSE(ParseNetworkUpdate(R"({"allowOut":[1]})").ok());
  EXPECT_FALSE(ParseNetworkUpdate(R"({"rules":{}})").ok());
}

TEST(E2bNewSandbox, RefusesByName) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "templateID"},
      {"[]", "object"},
      {"{", "not JSON"},
      {R"({"templateID":1})", "templateID"},
      {R"({"templateID":"base","timeout":0})", "timeout"},
      {R"({"templateID":"base","timeout":86401})", "timeout"},
      {R"({"templateID":"base","timeout":1.5})", "timeout"},
      {R"({"templateID":"base","metadata":[]})", "'metadata' must be an object"},
      {R"({"templateID":"base","metadata":{"k":null}})", "'metadata.k'"},
      {R"({"templateID":"base","envVars":{"A B":"x"}})", "not a variable name"},
      {R"({"templateID":"base","autoPause":true})", "autoPause"},
      {R"({"templateID":"base","allow_internet_access":1})", "allow_internet_access"},
      {R"({"templateID":"base","network":{"allowOut":"x"}})", "'network.allowOut' must be a list"},
      {R"({"templateID":"base","network":{"rules":{}}})", "'network.rules' is not supported"},
      {R"({"templateID":"base","network":{"egressProxy":{"address":"p:1"}}})", "egressProxy"},
      {R"({"templateID":"base","volumeMounts":[{"name":"v","path":"/v"}]})", "volumeMounts"},
  };
  for (const auto& [body, says] : cases) {
    auto r = ParseNewSandbox(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_THAT(r.status().message(), HasSubstr(says)) << body;
  }
}

TEST(E2bTimeout, RequiredOrNot) {
  EXPECT_EQ(*ParseTimeout(R"({"timeout":5})", true).value(), 5);
  EXPECT_FALSE(ParseTimeout("{}", true).ok());
  EXPECT_FALSE(ParseTimeout("{}", false).value().has_value());
  EXPECT_FALSE(ParseTimeout(R"({"timeout":-1})", false).ok());
}

TEST(E2bListQuery, ReadsTheSdksEncoding) {
  // Sandbox.list({query: {metadata: {'a b': 'c&d', tag: 't'}}}) on the wire.
  auto q = ParseListQuery("/v2/sandboxes?metadata=a%252520b%3Dc%252526d%26tag%3Dt&limit=2");
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->metadata.size(), 2u);
  EXPECT_EQ(q->metadata.at("a b"), "c&d");
  EXPECT_EQ(q->metadata.at("tag"), "t");
  EXPECT_EQ(q->limit, 2u);
  EXPECT_TRUE(q->running);
  EXPECT_FALSE(ParseListQuery("/v2/sandboxes?state=paused").value().running);
  EXPECT_TRUE(ParseListQuery("/v2/sandboxes?state=running,paused").value().running);
  for (const char* bad :
       {"?limit=0", "?limit=101", "?limit=x", "?state=gone", "?metadata=novalue"}) {
    EXPECT_FALSE(ParseListQuery(std::string("/v2/sandboxes") + bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace ci::daemon::e2b
