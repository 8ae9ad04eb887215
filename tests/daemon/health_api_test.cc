// /health and /ready over HTTP against the fake backend: /health serves the cached check,
// /ready asks the backend now and fails with it.
#include "fake_daemon.h"

namespace ci::daemon {
namespace {

class HealthApiTest : public DaemonApiTest {
 protected:
  void SetUp() override { Start(); }
};

TEST_F(HealthApiTest, HealthNamesTheBackendAndWhatItEnforces) {
  HttpReply r = client().Get("/health");
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = Json(r);
  EXPECT_EQ(Str(j, "status"), "ok");
  EXPECT_EQ(Str(j, "executor_backend"), "fake");
  EXPECT_EQ(Str(j, "network_isolation"), "none: an in-process fake");
  EXPECT_EQ(j["hardening"]["enforced"].Size(), 0u);
}

TEST_F(HealthApiTest, ReadyFailsWithTheBackendsOwnMessage) {
  EXPECT_EQ(client().Get("/ready").status, 200);
  fake().SetHealth(Status::Error("the runtime went away"));
  HttpReply r = client().Get("/ready");
  EXPECT_EQ(r.status, 503);
  auto j = Json(r);
  EXPECT_EQ(Str(j, "status"), "error");
  EXPECT_EQ(Str(j, "message"), "the runtime went away");
}

}  // namespace
}  // namespace ci::daemon
