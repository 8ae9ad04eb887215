// ApiClient against the fake API server (tests/k8s/fake_apiserver.py): real HTTPS with the CA
// and the token of the kubeconfig it writes, real pods, exec over WebSocket v5 and v4.
#include "k8s/api_client.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/await.h"
#include "core/json.h"
#include "k8s/access_review.h"
#include "k8s/exec_protocol.h"
#include "k8s/fake_apiserver.h"

namespace ci::k8s {
namespace {

using testing_support::AwaitOn;
using testing_support::FakeApiServer;

constexpr char kPod[] = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1"},
  "spec":{"restartPolicy":"Never","containers":[{"name":"runner","image":"executor:latest",
  "command":["sleep","3600"]}]}})";

struct ExecResult {
  std::string out, err;
  Result<int> exit = Status::Error("no status");
  std::string protocol;
};

class ApiClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the fake API server's pods need root";
  }

  std::unique_ptr<ApiClient> Client(const FakeApiServer& fake) {
    return fake.Client(io_.get_executor());
  }

  // Creates p1 and waits until it runs (polling GET: the watch is the backend's business).
  void StartPod(ApiClient& client) {
    auto created = AwaitOn(io_, client.Request("POST", "/api/v1/namespaces/default/pods", kPod));
    ASSERT_TRUE(created.ok()) << created.status().message();
    ASSERT_EQ(created->status, 201) << created->body;
    for (int i = 0; i < 600; ++i) {
      auto got = AwaitOn(io_, client.Request("GET", "/api/v1/namespaces/default/pods/p1", ""));
      ASSERT_TRUE(got.ok()) << got.status().message();
      if (got->body.find("\"phase\": \"Running\"") != std::string::npos ||
          got->body.find("\"phase\":\"Running\"") != std::string::npos) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "p1 never ran";
  }

  ExecResult Exec(ApiClient& client, std::vector<std::string> command, std::string stdin_data,
                  bool close_stdin, std::string pod = "p1") {
    ExecResult r;
    ExecTarget t{"default", std::move(pod), "runner", std::move(command), true};
    const std::string target = ExecRequestTarget(t);
    auto conn = AwaitOn(io_, client.Exec(target));
    if (!conn.ok()) {
      r.exit = conn.status();
      return r;
    }
    r.protocol = std::string((*conn)->protocol());
    const std::string in = StdinMessage(stdin_data);
    EXPECT_TRUE(AwaitOn(io_, (*conn)->Write(in)).ok());
    if (close_stdin) {
      const std::string close = CloseStdinMessage();
      EXPECT_TRUE(AwaitOn(io_, (*conn)->Write(close)).ok());
    }
    for (;;) {
      auto msg = AwaitOn(io_, (*conn)->Read());
      if (!msg.ok()) {
        r.exit = msg.status();
        break;
      }
      if (!msg->has_value()) break;
      auto m = ParseChannelMessage(**msg);
      if (!m) continue;
      if (m->channel == 1) r.out.append(m->payload);
      if (m->channel == 2) r.err.append(m->payload);
      if (m->channel == 3) r.exit = ExitCodeFromStatus(m->payload);
    }
    return r;
  }

  asio::io_context io_;
};

TEST_F(ApiClientTest, CreatesAPodAndReadsStatusErrors) {
  FakeApiServer fake;
  auto client = Client(fake);
  StartPod(*client);
  auto again = AwaitOn(io_, client->Request("POST", "/api/v1/namespaces/default/pods", kPod));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->status, 409);
  EXPECT_NE(ApiError("create p1", *again).message().find("AlreadyExists"), std::string::npos)
      << ApiError("create p1", *again).message();
  auto missing = AwaitOn(io_, client->Request("GET", "/api/v1/namespaces/default/pods/nope", ""));
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404);
  EXPECT_NE(ApiError("get nope", *missing).message().find("not found"), std::string::npos)
      << ApiError("get nope", *missing).message();
  auto deleted = AwaitOn(io_, client->Request("DELETE",
                                              "/api/v1/namespaces/default/pods/p1"
                                              "?gracePeriodSeconds=0",
                                              ""));
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->status, 200) << deleted->body;
}

TEST_F(ApiClientTest, ExecsOverV5WithStdinClosedAndTheExitCode) {
  FakeApiServer fake;
  auto client = Client(fake);
  StartPod(*client);
  ExecResult r = Exec(*client, {"sh", "-c", "cat; echo to-err >&2; exit 3"}, "hello\n", true);
  EXPECT_EQ(r.protocol, kProtocolV5);
  ASSERT_TRUE(r.exit.ok()) << r.exit.status().message();
  EXPECT_EQ(*r.exit, 3);
  EXPECT_EQ(r.out, "hello\n");
  EXPECT_EQ(r.err, "to-err\n");
  ExecResult ok = Exec(*client, {"true"}, "", true);
  ASSERT_TRUE(ok.exit.ok()) << ok.exit.status().message();
  EXPECT_EQ(*ok.exit, 0);
}

TEST_F(ApiClientTest, FallsBackToV4WhereTheServerHasNoV5) {
  FakeApiServer fake({"--no-v5"});
  auto client = Client(fake);
  StartPod(*client);
  // v4 cannot close stdin: the command reads exactly what is sent.
  ExecResult r = Exec(*client, {"sh", "-c", "head -c 6; exit 4"}, "hello\n", false);
  EXPECT_EQ(r.protocol, kProtocolV4);
  ASSERT_TRUE(r.exit.ok()) << r.exit.status().message();
  EXPECT_EQ(*r.exit, 4);
  EXPECT_EQ(r.out, "hello\n");
}

// The pod is not there: Gone (the executor then ends the session, 410), not a plain error.
TEST_F(ApiClientTest, AnExecIntoAPodThatIsNotThereIsGone) {
  FakeApiServer fake;
  auto client = Client(fake);
  StartPod(*client);
  ExecResult missing = Exec(*client, {"true"}, "", true, "nope");
  ASSERT_FALSE(missing.exit.ok());
  EXPECT_TRUE(missing.exit.status().gone()) << missing.exit.status().message();
  EXPECT_NE(missing.exit.status().message().find("not found"), std::string::npos)
      << missing.exit.status().message();
}

TEST_F(ApiClientTest, RefusedCallsSayWhy) {
  FakeApiServer fake({"--deny", "get:pods/exec", "--deny", "create:pods/exec"});
  auto client = Client(fake);
  StartPod(*client);
  ExecResult r = Exec(*client, {"true"}, "", true);
  ASSERT_FALSE(r.exit.ok());
  EXPECT_NE(r.exit.status().message().find("403"), std::string::npos) << r.exit.status().message();
  EXPECT_FALSE(r.exit.status().gone()) << "a refusal is not a pod gone";
  int declined = 0;
  const std::string target = ExecRequestTarget({"default", "p1", "runner", {"true"}, true});
  EXPECT_FALSE(AwaitOn(io_, client->Exec(target, &declined)).ok());
  EXPECT_EQ(declined, 403);

  // A wrong token: 401 with the server's Status.
  KubeConfig bad = client->config();
  bad.credentials = Credentials::Bearer("wrong");
  ApiClient wrong(io_.get_executor(), bad, std::chrono::seconds(10));
  auto got = AwaitOn(io_, wrong.Request("GET", "/api/v1/namespaces/default/pods", ""));
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->status, 401);

  // Another CA: the handshake fails and says the certificate did not verify.
  KubeConfig other_ca = client->config();
  other_ca.server.ca_pem.clear();  // the system's trust store does not know the fake's CA
  ApiClient untrusting(io_.get_executor(), other_ca, std::chrono::seconds(10));
  auto refused = AwaitOn(io_, untrusting.Request("GET", "/api/v1/namespaces/default/pods", ""));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("did not verify"), std::string::npos)
      << refused.status().message();
}

// The daemon's startup question (access_review.h), answered by the server's RBAC: each verb of
// each subresource on its own, and only in the namespace a denial names.
TEST_F(ApiClientTest, AccessReviewsNameWhatTheCredentialsMayNotDo) {
  FakeApiServer fake({"--namespace", "sandboxes", "--deny", "get:pods/attach:sandboxes", "--deny",
                      "create:pods/exec", "--deny", "create:pods/attach:sandboxes"});
  auto client = Client(fake);
  auto there = AwaitOn(io_, ReviewPodStreams(*client, "sandboxes"));
  ASSERT_TRUE(there.ok()) << there.status().message();
  EXPECT_EQ(there->exec_refused, "create pods/exec");
  EXPECT_EQ(there->attach_refused, "get pods/attach or create pods/attach");
  auto elsewhere = AwaitOn(io_, ReviewPodStreams(*client, "default"));
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status().message();
  EXPECT_EQ(elsewhere->exec_refused, "create pods/exec");
  EXPECT_EQ(elsewhere->attach_refused, "");
}

}  // namespace
}  // namespace ci::k8s
