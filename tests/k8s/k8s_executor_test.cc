// K8sExecutor against the fake API server, on both exec subprotocols: v5 (stdin closed with the
// close signal) and v4 (--no-v5: stdin cannot be half-closed, so the program and tar must stop
// by themselves), each with execution pods driven by execs and by their agent (over the pod's
// attach; the fake's images carry the agent built here, fake_apiserver.h). The e2e and hostile
// suites run the whole API on it; this covers what they cannot choose: the subprotocol, the agent,
// and the pods left behind.
#include "k8s/k8s_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "common/await.h"
#include "common/enforcement_spec.h"
#include "container/agent_container.h"
#include "core/unix_time.h"
#include "daemon/service/python_program.h"
#include "fake_apiserver.h"
#include "k8s/api_client.h"
#include "k8s/sandbox_claims.h"
#include "k8s/shared_pool.h"

namespace ci::k8s {
namespace {

using testing::HasSubstr;
using testing_support::AwaitOn;
using namespace std::chrono_literals;

struct Mode {
  bool v4 = false;             // --no-v5
  bool agent = false;          // K8sOptions::agent
  bool agent_sandbox = false;  // K8sOptions::agent_sandbox, the fake's controller on
};

struct Execution {
  Result<RunOutcome> outcome = Status::Error("not run");
  std::string out, err;
  ResourceReport report;  // Destroy's
};

class K8sExecutorTest : public testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the fake API server's pods need root";
    // A node whose kubelet has a podPidsLimit (the backend's downgrade tells administrators to
    // set one), small enough for a test to fill.
    std::vector<std::string> flags = {"--pod-pids-limit", "32"};
    if (GetParam().v4) flags.push_back("--no-v5");
    if (GetParam().agent_sandbox) flags.push_back("--agent-sandbox");
    flags.insert(flags.end(), denied_.begin(), denied_.end());
    fake_ = std::make_unique<testing_support::FakeApiServer>(flags);
    executor_ = Make("code-interpreter-executor:latest");
  }
  void TearDown() override {
    if (executor_) {
      AwaitOn(io_, Drained(*executor_));
      EXPECT_EQ(PodCount(), 0) << "pods left behind";
    }
  }

  std::unique_ptr<Executor> Make(const std::string& image,
                                 const std::function<void(K8sExecutorOptions&)>& adjust = {}) {
    K8sExecutorOptions o;
    auto config = LoadKubeconfig(fake_->kubeconfig());
    EXPECT_TRUE(config.ok()) << config.status().message();
    o.connection = std::move(config).value();
    o.pods.image = image;
    o.pods.net_admin_lockdown = false;
    o.start_timeout = 30s;
    o.pods.agent = GetParam().agent;
    o.pods.agent_path = testing_support::kFakeImageAgent;
    o.pods.agent_sandbox = GetParam().agent_sandbox;
    if (adjust) adjust(o);
    return MakeK8sExecutor(io_.get_executor(), std::move(o));
  }

  static asio::awaitable<int> Drained(Executor& e) {
    co_await e.Drain();
    co_return 0;
  }

  int PodCount() {
    auto client = fake_->Client(io_.get_executor());
    auto r = AwaitOn(io_, client->Request("GET", "/api/v1/namespaces/default/pods", ""));
    if (!r.ok()) return -1;
    rapidjson::Document d;
    std::string why;
    if (!ParseJson(r->body, d, why) || !d.HasMember("items")) return -1;
    return static_cast<int>(d["items"].Size());
  }

  static SandboxSpec Spec() {
    SandboxSpec spec;
    spec.env = DefaultSandboxEnv();
    return spec;
  }

  Execution Run(Sandbox& sandbox, std::vector<std::string> argv,
                std::optional<std::string> stdin_data = std::nullopt,
                std::vector<StagedFile> files = {}, std::chrono::milliseconds timeout = 20s,
                const std::string& client = "") {
    Execution e;
    RunPayload p;
    p.client = client;
    p.argv = std::move(argv);
    p.stdin_data = std::move(stdin_data);
    p.files = std::move(files);
    p.timeout = timeout;
    e.outcome = AwaitOn(io_, sandbox.Run(std::move(p), [&](StreamKind k, std::string_view d) {
      (k == StreamKind::kStdout ? e.out : e.err).append(d);
    }));
    return e;
  }

  std::unique_ptr<Sandbox> Prepare(const SandboxSpec& spec = Spec()) {
    auto s = AwaitOn(io_, executor_->Prepare(spec));
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  // Runs the io_context until `done` holds, or for at most `limit`.
  template <typename F>
  bool RunUntil(F done, std::chrono::seconds limit = 30s) {
    io_.restart();
    const auto give_up = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < give_up) io_.run_one_for(100ms);
    return done();
  }

  boost::asio::io_context io_;
  std::vector<std::string> denied_;  // the fake's --deny flags
  std::unique_ptr<testing_support::FakeApiServer> fake_;
  std::unique_ptr<Executor> executor_;
};

TEST_P(K8sExecutorTest, StdinReachesTheProgramWhichThenReadsEof) {
  auto sandbox = Prepare();
  ASSERT_TRUE(sandbox);
  auto e = Run(*sandbox, {"bash", "-c", "cat; echo err >&2; exit 3"}, std::string("hello\n"));
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_EQ(e.out, "hello\n");
  EXPECT_EQ(e.err, "err\n");
  EXPECT_EQ(e.outcome->exit_code, 3);
  EXPECT_FALSE(e.outcome->timed_out);
  AwaitOn(io_, sandbox->Destroy());
}

// The pod's PID 1 is the agent (its steps are frames on the attach), or the shell's `sleep`.
TEST_P(K8sExecutorTest, Pid1IsTheAgentOrASleep) {
  auto sandbox = Prepare();
  ASSERT_TRUE(sandbox);
  // Without the agent, PID 1 is bash until it execs sleep: a pod counts as running once its
  // command started (runc's too), so an exec may find it a moment before that exec.
  auto e =
      Run(*sandbox, {"bash", "-c",
                     "for i in $(seq 500); do [ \"$(head -c 9 /proc/1/cmdline)\" = /bin/bash ] "
                     "|| break; sleep 0.01; done; tr '\\0' ' ' < /proc/1/cmdline"});
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  std::string agent = std::string(testing_support::kFakeImageAgent) + " ";
  for (const char* dir : container::kAgentWipes) agent += std::string("--wipe ") + dir + " ";
  EXPECT_EQ(e.out, GetParam().agent ? agent : "sleep infinity ");
  AwaitOn(io_, sandbox->Destroy());
}

TEST_P(K8sExecutorTest, NoStdinIsEofAtOnce) {
  auto sandbox = Prepare();
  ASSERT_TRUE(sandbox);
  auto e = Run(*sandbox, {"bash", "-c", "wc -c"});
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_EQ(e.out, "0\n");
  EXPECT_FALSE(e.outcome->timed_out);
  AwaitOn(io_, sandbox->Destroy());
}

// Files too big for the argv go by `tar -x` over an exec, whose stdin v4 cannot close.
TEST_P(K8sExecutorTest, LargeFilesAreStagedAndOutputsCollected) {
  auto dir = std::filesystem::temp_directory_path() / ("k8s-exec-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "out");
  { std::ofstream(dir / "big.bin", std::ios::binary) << std::string(300000, 'x'); }
  auto sandbox = Prepare();
  ASSERT_TRUE(sandbox);
  auto e = Run(*sandbox, {"bash", "-c", "wc -c < data/big.bin; echo made > out.txt"}, std::nullopt,
               {{"data/big.bin", (dir / "big.bin").string()}});
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_EQ(e.out, "300000\n") << e.err;
  CollectLimits limits;
  limits.dest_dir = (dir / "out").string();
  auto collected = AwaitOn(io_, sandbox->Collect(limits));
  ASSERT_TRUE(collected.ok()) << collected.status().message();
  std::map<std::string, std::string> got;
  for (const auto& f : collected->files) {
    std::stringstream ss;
    ss << std::ifstream(f.host_path).rdbuf();
    got[f.workspace_path] = ss.str();
  }
  EXPECT_EQ(got["out.txt"], "made\n");
  EXPECT_EQ(got["data/big.bin"].size(), 300000u);
  AwaitOn(io_, sandbox->Destroy());
  std::filesystem::remove_all(dir);
}

TEST_P(K8sExecutorTest, TimeoutKillsTheProgram) {
  auto sandbox = Prepare();
  ASSERT_TRUE(sandbox);
  auto e = Run(*sandbox, {"sleep", "30"}, std::nullopt, {}, 1s);
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_TRUE(e.outcome->timed_out);
  EXPECT_EQ(e.outcome->signal, SIGKILL);
  AwaitOn(io_, sandbox->Destroy());
}

// The pod's pids limit full of the program's processes: no kill exec can start at the timeout,
// so the pod is deleted whole; the run still ends as a timeout, its files are reported lost. The
// agent needs no new process to kill them (its own kill(-1)): then the files are kept.
TEST_P(K8sExecutorTest, AProgramThatOutlivesItsKillExecEndsWithItsPod) {
  auto sandbox = Prepare();
  ASSERT_TRUE(sandbox);
  auto e = Run(*sandbox,
               {"python3", "-c",
                "import os, time\n"
                "open('out.txt', 'w').write('x')\n"
                "while True:\n"
                "    try:\n"
                "        if os.fork() == 0:\n"
                "            time.sleep(300)\n"
                "    except OSError:\n"
                "        time.sleep(0.05)\n"},
               std::nullopt, {}, 2s);
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_TRUE(e.outcome->timed_out);
  CollectLimits limits;
  limits.dest_dir = std::filesystem::temp_directory_path().string();
  auto collected = AwaitOn(io_, sandbox->Collect(limits));
  ASSERT_TRUE(collected.ok()) << collected.status().message();
  if (GetParam().agent) {
    ASSERT_EQ(collected->files.size(), 1u);
    EXPECT_EQ(collected->files[0].workspace_path, "out.txt");
    EXPECT_FALSE(collected->truncated);
  } else {
    EXPECT_TRUE(collected->files.empty());
    EXPECT_TRUE(collected->truncated) << "out.txt went with the pod: reported, not silent";
  }
  AwaitOn(io_, sandbox->Destroy());
}

TEST_P(K8sExecutorTest, ASessionKeepsItsFilesAndBackgroundProgramsBetweenRuns) {
  SandboxSpec spec = Spec();
  spec.session_expires_at = std::time(nullptr) + 600;
  auto sandbox = Prepare(spec);
  ASSERT_TRUE(sandbox);
  RunPayload bg;
  bg.argv = {"bash", "-c", "echo $$ > /tmp/bg.pid; exec sleep 300"};
  bg.background = true;
  auto started = AwaitOn(io_, sandbox->Run(std::move(bg), [](StreamKind, std::string_view) {}));
  ASSERT_TRUE(started.ok()) << started.status().message();
  auto first = Run(*sandbox, {"bash", "-c", "echo kept > /tmp/state; sleep 100 &"});
  ASSERT_TRUE(first.outcome.ok()) << first.outcome.status().message();
  auto second = Run(*sandbox, {"bash", "-c",
                               "cat /tmp/state; kill -0 $(cat /tmp/bg.pid) && "
                               "echo alive; pgrep -c -x -f 'sleep 100'"});
  ASSERT_TRUE(second.outcome.ok()) << second.outcome.status().message();
  EXPECT_EQ(second.out, "kept\nalive\n0\n") << "the run's leftover `sleep 100` is killed";
  AwaitOn(io_, sandbox->Destroy());
}

TEST_P(K8sExecutorTest, AnImageThatCannotBePulledFailsPrepareAndLeavesNoPod) {
  executor_ = Make("registry.example/none:pull-fails");
  auto s = AwaitOn(io_, executor_->Prepare(Spec()));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("ErrImagePull"));
  EXPECT_EQ(s.status().unavailable_reason(), "pod start");  // a 503 naming it, not a 500
  Status health = AwaitOn(io_, executor_->Check());         // /health and /ready say so meanwhile
  EXPECT_THAT(health.message(), HasSubstr("the last executor pod did not start"));
}

TEST_P(K8sExecutorTest, CheckAnswersAndNamesTheHealthProblem) {
  EXPECT_TRUE(AwaitOn(io_, executor_->Check()).ok());
}

// Every measure /health reports for a pod holds inside one (the local and docker backends have
// the same test: tests/runtime/enforcement_test.cc, DockerTest.EnforcementReportIsWhatIsInForce).
TEST_P(K8sExecutorTest, EnforcementReportIsWhatIsInForce) {
  SandboxSpec spec = testing_support::WithDistinctLimits(Spec());
  const Enforcement report = executor_->enforcement(spec);
  SCOPED_TRACE("reported: " + testing_support::ReportedNames(report));
  auto sandbox = Prepare(spec);
  ASSERT_TRUE(sandbox);
  auto e = Run(*sandbox, {"bash", "-c", testing_support::kContainerProbeScript});
  AwaitOn(io_, sandbox->Destroy());
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  SCOPED_TRACE("probe: " + e.out);
  std::map<std::string, std::string> in = testing_support::ParseProbe(e.out);
  auto host_ns = [](const std::string& n) {
    return std::filesystem::read_symlink("/proc/self/ns/" + n).string();
  };
  ASSERT_FALSE(report.enforced.empty());
  for (const Measure& m : report.enforced) {
    SCOPED_TRACE(MeasureName(m));
    switch (m.kind) {
      case MeasureKind::kPidNamespace:
        EXPECT_NE(in["ns_pid"], host_ns("pid"));
        break;
      case MeasureKind::kMountNamespace:
        EXPECT_NE(in["ns_mnt"], host_ns("mnt"));
        break;
      case MeasureKind::kReadOnlyRoot:
        EXPECT_EQ(in["usr"], "read-only");
        break;
      case MeasureKind::kNoCapabilities:
        for (const char* set : {"CapEff", "CapPrm", "CapBnd"}) {
          EXPECT_EQ(in[set], "0000000000000000") << set;
        }
        break;
      case MeasureKind::kNoNewPrivs:
        EXPECT_EQ(in["NoNewPrivs"], "1");
        break;
      case MeasureKind::kSeccomp:
        EXPECT_EQ(in["Seccomp"], "2");
        break;
      case MeasureKind::kMemoryLimit:
        EXPECT_EQ(in["mem"], std::to_string(200ull << 20));
        break;
      case MeasureKind::kCpuCap:
        EXPECT_EQ(in["cpu"], "50000 100000");
        break;
      case MeasureKind::kCpuTime:
        EXPECT_EQ(in["ulimit_t"], "7");
        break;
      case MeasureKind::kOpenFilesLimit:
        EXPECT_EQ(in["limit_nofile"], std::to_string(m.amount));
        break;
      case MeasureKind::kQueuedSignalsLimit:
        EXPECT_EQ(in["limit_sigpending"], std::to_string(m.amount));
        break;
      case MeasureKind::kMessageQueueLimit:
        EXPECT_EQ(in["limit_msgqueue"], std::to_string(m.amount));
        break;
      case MeasureKind::kLockedMemoryLimit:
        EXPECT_EQ(in["limit_memlock"], std::to_string(m.amount));
        break;
      case MeasureKind::kNoTerminal:
        EXPECT_EQ(in["tty"], "none");
        break;
      default:
        ADD_FAILURE() << "a measure this test does not check";
    }
  }
}

// A cluster whose RBAC refuses pods/attach: the agent cannot be reached, so execution pods are
// driven by exec (a downgrade /health names), whether an access review or a real attach said so.
class AttachRefusedTest : public K8sExecutorTest {
 protected:
  AttachRefusedTest() { denied_ = {"--deny", "get:pods/attach", "--deny", "create:pods/attach"}; }

  // A pod driven by exec runs the program, and the downgrade gives `reason`.
  void ExpectAnExecPod(const std::string& reason) {
    auto sandbox = Prepare();
    ASSERT_TRUE(sandbox);
    auto e = Run(*sandbox, {"bash", "-c", "echo ran; tr '\\0' ' ' < /proc/1/cmdline"});
    ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
    EXPECT_THAT(e.out, testing::StartsWith("ran\n"));
    EXPECT_THAT(e.out, Not(HasSubstr(testing_support::kFakeImageAgent)));
    AwaitOn(io_, sandbox->Destroy());
    const std::vector<Downgrade> downgrades = executor_->downgrades();
    ASSERT_EQ(downgrades.size(), 1u);
    EXPECT_THAT(downgrades[0].measure, HasSubstr("pods/attach"));
    EXPECT_THAT(downgrades[0].fix, HasSubstr("pods/attach"));
    EXPECT_THAT(downgrades[0].reason, HasSubstr(reason));
    EXPECT_TRUE(AwaitOn(io_, executor_->Check()).ok()) << "a downgrade, not a failure";
  }
};

TEST_P(AttachRefusedTest, TheFirstRefusedAttachTurnsExecutionsToExec) {
  EXPECT_TRUE(executor_->downgrades().empty());
  // A sandbox made for its claim has the claim's name (none is pooled here).
  ExpectAnExecPod(GetParam().agent_sandbox ? "the API server refused to attach to pod ci-claim-"
                                           : "the API server refused to attach to pod ci-exec-");
}

TEST_P(AttachRefusedTest, TheAccessReviewTurnsExecutionsToExecBeforeAnyPod) {
  ASSERT_TRUE(AwaitOn(io_, executor_->Check()).ok());
  ExpectAnExecPod("may not get pods/attach or create pods/attach (access review)");
}

INSTANTIATE_TEST_SUITE_P(Agent, AttachRefusedTest,
                         testing::Values(Mode{false, true}, Mode{false, true, true}),
                         [](const testing::TestParamInfo<Mode>& p) {
                           return std::string(p.param.agent_sandbox ? "agent_sandbox" : "pods");
                         });

// Without pods/exec nothing but an agent's execution could run: /health says what to grant.
class ExecRefusedTest : public K8sExecutorTest {
 protected:
  ExecRefusedTest() { denied_ = {"--deny", "create:pods/exec"}; }
};

TEST_P(ExecRefusedTest, CheckNamesTheMissingVerb) {
  Status health = AwaitOn(io_, executor_->Check());
  ASSERT_FALSE(health.ok());
  EXPECT_THAT(health.message(), HasSubstr("may not create pods/exec in namespace default"));
  EXPECT_TRUE(executor_->downgrades().empty());
}

INSTANTIATE_TEST_SUITE_P(Agent, ExecRefusedTest, testing::Values(Mode{false, true}));

// Two replicas (executors of one configuration) with KUBERNETES_SHARED_WARM_POOL: one pool of
// pods in the namespace, filled by both, each pod claimed by one replica only.
class SharedPoolTest : public K8sExecutorTest {
 protected:
  std::unique_ptr<Executor> Replica() {
    return Make("code-interpreter-executor:latest", [](K8sExecutorOptions& o) {
      o.pods.shared_warm_pool = true;
      o.shared_pool_period = 200ms;
    });
  }

  // The pods of the shared pools (a PodList; no items when it could not be read).
  rapidjson::Document PoolPodList() {
    auto client = fake_->Client(io_.get_executor());
    auto r = AwaitOn(io_, client->Request("GET",
                                          "/api/v1/namespaces/default/pods?labelSelector="
                                          "code-interpreter.pool",
                                          ""));
    rapidjson::Document d;
    std::string why;
    if (!r.ok() || !ParseJson(r->body, d, why) || !d.HasMember("items")) d.SetObject();
    return d;
  }

  // The pool's pods: {unclaimed and running, all}.
  std::pair<int, int> PoolPods() {
    rapidjson::Document d = PoolPodList();
    if (!d.HasMember("items")) return {-1, -1};
    int free = 0;
    for (const auto& pod : d["items"].GetArray()) {
      const bool claimed = pod["metadata"]["labels"].HasMember("code-interpreter.claimed-by");
      const std::string phase = pod["status"]["phase"].GetString();
      free += !claimed && phase == "Running";
    }
    return {free, static_cast<int>(d["items"].Size())};
  }

  // The pool keys the pool's pods carry.
  std::vector<std::string> PoolKeys() {
    rapidjson::Document d = PoolPodList();
    std::vector<std::string> keys;
    if (!d.HasMember("items")) return keys;
    for (const auto& pod : d["items"].GetArray()) {
      keys.push_back(pod["metadata"]["labels"]["code-interpreter.pool"].GetString());
    }
    return keys;
  }

  static double Metric(const Executor& e, const std::string& name) {
    for (const auto& m : e.metrics()) {
      if (m.name == name) return m.value;
    }
    return -1;
  }

  void TearDown() override {
    for (auto* r : {&a_, &b_}) {
      if (*r) AwaitOn(io_, Drained(**r));
    }
    // The pool's pods are the deployment's: they outlive its replicas, so the test removes them.
    auto client = fake_->Client(io_.get_executor());
    AwaitOn(io_, client->Request("DELETE",
                                 "/api/v1/namespaces/default/pods?labelSelector="
                                 "code-interpreter.pool&gracePeriodSeconds=0",
                                 ""));
    RunUntil([&] { return PodCount() == 0; });
    K8sExecutorTest::TearDown();
  }

  std::unique_ptr<Executor> a_, b_;
};

TEST_P(SharedPoolTest, TwoReplicasFillOnePoolAndEachPodServesOneOfThem) {
  a_ = Replica();
  b_ = Replica();
  const SandboxSpec spec = Spec();
  ASSERT_TRUE(a_->KeepSharedPool(spec, 2));
  ASSERT_TRUE(b_->KeepSharedPool(spec, 2));
  ASSERT_TRUE(RunUntil([&] { return PoolPods().first >= 2; })) << PoolPods().second;
  // Both keepers looked at an empty pool: at most one pod more than its size.
  EXPECT_LE(PoolPods().second, 3);

  // Both replicas at once: each gets a pooled pod of its own.
  std::optional<Result<std::unique_ptr<Sandbox>>> from_a, from_b;
  asio::co_spawn(
      io_, [&]() -> asio::awaitable<void> { from_a.emplace(co_await a_->Prepare(spec)); },
      asio::detached);
  asio::co_spawn(
      io_, [&]() -> asio::awaitable<void> { from_b.emplace(co_await b_->Prepare(spec)); },
      asio::detached);
  ASSERT_TRUE(RunUntil([&] { return from_a && from_b; }));
  ASSERT_TRUE(from_a->ok()) << from_a->status().message();
  ASSERT_TRUE(from_b->ok()) << from_b->status().message();
  EXPECT_EQ(Metric(*a_, "code_interpreter_shared_pool_claims_total"), 1);
  EXPECT_EQ(Metric(*b_, "code_interpreter_shared_pool_claims_total"), 1);
  EXPECT_EQ(Metric(*a_, "code_interpreter_shared_pool_misses_total"), 0);
  Sandbox& sa = ***from_a;
  Sandbox& sb = ***from_b;
  auto ea = Run(sa, {"bash", "-c", "touch /tmp/a-was-here; ls /tmp"});
  auto eb = Run(sb, {"bash", "-c", "ls /tmp; echo b"});
  ASSERT_TRUE(ea.outcome.ok() && eb.outcome.ok());
  EXPECT_EQ(ea.out, "a-was-here\n");
  EXPECT_EQ(eb.out, "b\n") << "one pod served both replicas";
  AwaitOn(io_, sa.Destroy());
  AwaitOn(io_, sb.Destroy());

  // The pool is filled again; a replica's shutdown leaves it to the other.
  ASSERT_TRUE(RunUntil([&] { return PoolPods().first >= 2; }));
  AwaitOn(io_, Drained(*a_));
  EXPECT_GE(PoolPods().first, 2) << "a replica's shutdown took the deployment's pods";
  auto again = AwaitOn(io_, b_->Prepare(spec));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(Metric(*b_, "code_interpreter_shared_pool_claims_total"), 2);
  auto e = Run(**again, {"bash", "-c", "echo served"});
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_EQ(e.out, "served\n");
  AwaitOn(io_, (*again)->Destroy());
}

// The claim's precondition: of two claims of one listed version, one wins.
TEST_P(SharedPoolTest, APodListedOnceIsClaimedOnce) {
  a_ = Replica();
  ASSERT_TRUE(a_->KeepSharedPool(Spec(), 1));
  ASSERT_TRUE(RunUntil([&] { return PoolPods().first >= 1; }));
  AwaitOn(io_, Drained(*a_));  // no keeper adds a pod meanwhile
  auto client = fake_->Client(io_.get_executor());
  const std::string key = PoolKeys().at(0);
  auto listed = AwaitOn(io_, ListPoolPods(*client, "default", key, 0));
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  ASSERT_EQ(listed->free.size(), 1u);
  const FreePoolPod pod = listed->free[0];
  auto first = AwaitOn(io_, ClaimPoolPod(*client, "default", pod, "replica-a", "a"));
  auto second = AwaitOn(io_, ClaimPoolPod(*client, "default", pod, "replica-b", "b"));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_TRUE(*first);
  EXPECT_FALSE(*second) << "a pod claimed twice";
  auto after = AwaitOn(io_, ListPoolPods(*client, "default", key, 0));
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->free.empty());
}

// The pools of specs that differ only in their program (python's, bash's) are one pool of pods.
TEST_P(SharedPoolTest, PoolsOfTheSamePodsAreOnePoolOfTheirSummedSize) {
  a_ = Replica();
  SandboxSpec python = Spec(), bash = Spec();
  python.prestart_argv = {"python3", "-i"};
  bash.prestart_argv = {"bash"};
  ASSERT_TRUE(a_->KeepSharedPool(python, 1));
  ASSERT_TRUE(a_->KeepSharedPool(bash, 2));
  ASSERT_TRUE(RunUntil([&] { return PoolPods().first >= 3; })) << PoolPods().second;
  const std::vector<std::string> keys = PoolKeys();
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), 1u);
  RunUntil([] { return false; }, 1s);  // the keeper's next looks add nothing
  EXPECT_EQ(PoolPods().second, 3);
}

// Pool pods that end unused (here: no agent at the configured path) are deleted, and the keeper
// backs off instead of making a pod every look.
TEST_P(SharedPoolTest, PodsThatEndUnusedAreRemovedAndThePoolBacksOff) {
  a_ = Make("code-interpreter-executor:latest", [](K8sExecutorOptions& o) {
    o.pods.shared_warm_pool = true;
    o.shared_pool_period = 100ms;
    o.pods.agent_path = "/no/such/agent";
  });
  ASSERT_TRUE(a_->KeepSharedPool(Spec(), 1));
  RunUntil([] { return false; }, 4s);
  // Backing off 1 s, then 2 s: three or four pods in 4 s (at 100 ms, forty).
  const double created = Metric(*a_, "code_interpreter_shared_pool_pods_created_total");
  EXPECT_GE(created, 1);
  EXPECT_LE(created, 5);
  AwaitOn(io_, Drained(*a_));
  RunUntil([&] { return PoolPods().second == 0; }, 10s);
  EXPECT_LE(PoolPods().second, 1) << "ended pool pods were left";
}

// A spec of no pool (a session, other limits) is made on the spot, as without the option.
TEST_P(SharedPoolTest, OtherSpecsAreNotServedFromThePool) {
  a_ = Replica();
  ASSERT_TRUE(a_->KeepSharedPool(Spec(), 1));
  SandboxSpec session = Spec();
  session.session_expires_at = UnixSeconds() + 600;
  EXPECT_FALSE(a_->KeepSharedPool(session, 1));
  ASSERT_TRUE(RunUntil([&] { return PoolPods().first >= 1; }));
  SandboxSpec other = Spec();
  other.limits.memory_bytes = 2 * Spec().limits.memory_bytes;
  auto s = AwaitOn(io_, a_->Prepare(other));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(Metric(*a_, "code_interpreter_shared_pool_claims_total"), 0);
  EXPECT_EQ(PoolPods().first, 1);
  AwaitOn(io_, (*s)->Destroy());
}

INSTANTIATE_TEST_SUITE_P(Agent, SharedPoolTest, testing::Values(Mode{false, true}));

// KUBERNETES_SANDBOX_API=agent-sandbox against the fake's agent-sandbox controller: warm pools
// are SandboxWarmPools of a template per pod, shared by the replicas of one configuration.
class AgentSandboxTest : public K8sExecutorTest {
 protected:
  // A list of the namespace's `plural` of extensions.agents.x-k8s.io (no items when unread).
  rapidjson::Document ListExtensions(const std::string& plural) {
    auto client = fake_->Client(io_.get_executor());
    const std::string path =
        "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/" + plural;
    auto r = AwaitOn(io_, client->Request("GET", path, ""));
    rapidjson::Document d;
    std::string why;
    if (!r.ok() || !ParseJson(r->body, d, why) || !d.HasMember("items")) d.SetObject();
    return d;
  }

  // The warm pools' {spec.replicas, status.readyReplicas}, by name.
  std::map<std::string, std::pair<int, int>> Pools() {
    std::map<std::string, std::pair<int, int>> out;
    rapidjson::Document d = ListExtensions("sandboxwarmpools");
    if (!d.HasMember("items")) return out;
    for (const auto& pool : d["items"].GetArray()) {
      int ready = 0;
      if (pool.HasMember("status") && pool["status"].HasMember("readyReplicas")) {
        ready = pool["status"]["readyReplicas"].GetInt();
      }
      out[pool["metadata"]["name"].GetString()] = {pool["spec"]["replicas"].GetInt(), ready};
    }
    return out;
  }

  int Claims() { return static_cast<int>(ClaimedSandboxes().size()); }

  // The sandboxes the claims are bound to ("" for one not bound).
  std::vector<std::string> ClaimedSandboxes() {
    std::vector<std::string> out;
    rapidjson::Document d = ListExtensions("sandboxclaims");
    if (!d.HasMember("items")) return {"unread"};
    for (const auto& claim : d["items"].GetArray()) {
      std::string name;
      if (claim.HasMember("status") && claim["status"].HasMember("sandbox")) {
        name = claim["status"]["sandbox"]["name"].GetString();
      }
      out.push_back(name);
    }
    return out;
  }

  void TearDown() override {
    if (b_) AwaitOn(io_, Drained(*b_));
    // The warm pools are the deployment's: they outlive its replicas, so the test removes them.
    auto client = fake_->Client(io_.get_executor());
    for (const auto& [name, sizes] : Pools()) {
      AwaitOn(io_, client->Request("DELETE",
                                   "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/"
                                   "sandboxwarmpools/" +
                                       name,
                                   ""));
    }
    RunUntil([&] { return PodCount() == 0; });
    K8sExecutorTest::TearDown();
  }

  std::unique_ptr<Executor> b_;
};

TEST_P(AgentSandboxTest, TwoReplicasShareOneWarmPoolOfSandboxes) {
  b_ = Make("code-interpreter-executor:latest");
  const SandboxSpec spec = Spec();
  ASSERT_TRUE(executor_->KeepSharedPool(spec, 2));
  ASSERT_TRUE(b_->KeepSharedPool(spec, 2));
  ASSERT_TRUE(RunUntil([&] {
    auto pools = Pools();
    return pools.size() == 1 && pools.begin()->second.second == 2;
  }));
  const std::string pool = Pools().begin()->first;
  EXPECT_EQ(Pools().begin()->second.first, 2) << "the size is the deployment's, not the sum";
  EXPECT_EQ(PodCount(), 2);

  // Claimed from the pool: the pod is one of its sandboxes', and the pool makes another.
  auto a = AwaitOn(io_, executor_->Prepare(spec));
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto b = AwaitOn(io_, b_->Prepare(spec));
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto ea = Run(**a, {"bash", "-c", "touch /tmp/a-was-here; ls /tmp"});
  auto eb = Run(**b, {"bash", "-c", "ls /tmp; echo b"});
  ASSERT_TRUE(ea.outcome.ok()) << ea.outcome.status().message();
  ASSERT_TRUE(eb.outcome.ok()) << eb.outcome.status().message();
  EXPECT_EQ(ea.out, "a-was-here\n");
  EXPECT_EQ(eb.out, "b\n") << "one sandbox served both";
  const std::vector<std::string> bound = ClaimedSandboxes();
  ASSERT_EQ(bound.size(), 2u);
  for (const std::string& sandbox : bound) {
    EXPECT_THAT(sandbox, testing::StartsWith(pool + "-")) << "not one of the pool's";
  }
  EXPECT_NE(bound[0], bound[1]);
  ASSERT_TRUE(RunUntil([&] { return Pools()[pool].second == 2 && PodCount() == 4; }));

  // An execution's end deletes its claim, its sandbox and its pod.
  AwaitOn(io_, (*a)->Destroy());
  AwaitOn(io_, (*b)->Destroy());
  ASSERT_TRUE(RunUntil([&] { return Claims() == 0; }));
  EXPECT_EQ(PodCount(), 2) << "the claimed sandboxes' pods are gone, the pool's stay";
}

TEST_P(AgentSandboxTest, ASpecWithoutAPoolIsAColdStartOfItsOwnTemplate) {
  SandboxSpec spec = Spec();
  spec.limits.memory_bytes = 300u << 20;  // no pool of this pod
  auto sandbox = Prepare(spec);
  ASSERT_TRUE(sandbox);
  auto pools = Pools();
  ASSERT_EQ(pools.size(), 1u);
  EXPECT_EQ(pools.begin()->second.first, 0) << "a template's pool of no sandboxes: cold claims";
  auto e = Run(*sandbox, {"bash", "-c", "echo cold"});
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_EQ(e.out, "cold\n");
  const std::vector<std::string> bound = ClaimedSandboxes();
  ASSERT_EQ(bound.size(), 1u);
  EXPECT_THAT(bound[0], testing::StartsWith("ci-claim-")) << "a cold sandbox has its claim's name";
  AwaitOn(io_, sandbox->Destroy());
  ASSERT_TRUE(RunUntil([&] { return Claims() == 0; }));
  EXPECT_EQ(PodCount(), 0);
}

// A session is a claim of the sessions' template, found by its labels by another replica.
TEST_P(AgentSandboxTest, ASessionIsAClaimAnotherReplicaFindsAndEnds) {
  b_ = Make("code-interpreter-executor:latest");
  auto session_spec = [](const std::string& id) {
    SandboxSpec spec = Spec();
    spec.session_expires_at = std::time(nullptr) + 600;
    spec.session = {id, static_cast<double>(std::time(nullptr)),
                    static_cast<double>(spec.session_expires_at), "alice"};
    return spec;
  };
  const SandboxSpec one = session_spec("session-one");
  auto first = AwaitOn(io_, executor_->Prepare(one));
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = AwaitOn(io_, executor_->Prepare(session_spec("session-two")));
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(ListExtensions("sandboxtemplates")["items"].Size(), 1u)
      << "a template per session: its identity is in its pod";
  auto e = Run(**first, {"bash", "-c", "echo kept > /tmp/state"});
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();

  // The other replica lists both and serves the first from its sandbox's pod.
  auto listed = AwaitOn(io_, b_->ListSessions());
  ASSERT_TRUE(listed.ok() && listed->has_value()) << listed.status().message();
  std::set<std::string> ids;
  for (const auto& identity : **listed) ids.insert(identity.id);
  EXPECT_EQ(ids, (std::set<std::string>{"session-one", "session-two"}));
  auto found = AwaitOn(io_, b_->FindSession(Spec(), "session-one"));
  ASSERT_TRUE(found.ok()) << found.status().message();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->identity.client, "alice");
  auto there = Run(*(*found)->sandbox, {"cat", "/tmp/state"});
  ASSERT_TRUE(there.outcome.ok()) << there.outcome.status().message();
  EXPECT_EQ(there.out, "kept\n");
  auto missing = AwaitOn(io_, b_->FindSession(Spec(), "session-three"));
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());

  // Ending it through the other replica removes its claim, sandbox and pod for all.
  AwaitOn(io_, (*found)->sandbox->Destroy());
  AwaitOn(io_, (*second)->Destroy());
  ASSERT_TRUE(RunUntil([&] { return Claims() == 0 && PodCount() == 0; }));
  auto gone = AwaitOn(io_, executor_->FindSession(Spec(), "session-one"));
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
}

// No claim outlives the replica that made it: one whose Prepare is still in flight when the
// replica drains (here its pod cannot be scheduled) is deleted then, and one that a replica gone
// without draining left is deleted by the next replica's reaper.
TEST_P(AgentSandboxTest, NoClaimOutlivesTheReplicaThatMadeIt) {
  executor_ = Make("registry.example/none:unschedulable");
  bool ended = false;
  auto prepare = [](Executor& e, bool* done) -> asio::awaitable<void> {
    auto sandbox = co_await e.Prepare(Spec());
    *done = true;
  };
  asio::co_spawn(io_, prepare(*executor_, &ended), asio::detached);
  ASSERT_TRUE(RunUntil([&] { return Claims() == 1; }));
  EXPECT_FALSE(ended) << "the Prepare is still in flight";
  AwaitOn(io_, Drained(*executor_));
  // Looked at on an io_context of its own: the Prepare goes no further, as in a daemon that
  // exits once drained.
  boost::asio::io_context after;
  auto look = fake_->Client(after.get_executor());
  auto listed = AwaitOn(after, look->Request("GET",
                                             "/apis/extensions.agents.x-k8s.io/v1beta1/"
                                             "namespaces/default/sandboxclaims",
                                             ""));
  ASSERT_TRUE(listed.ok());
  EXPECT_THAT(listed->body, Not(HasSubstr("ci-claim-"))) << "the claim outlived the replica";
  EXPECT_TRUE(RunUntil([&] { return ended; }));

  const pid_t gone = ::fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  ::waitpid(gone, nullptr, 0);
  ClaimRequest left;
  left.pool = "a-pool-long-gone";
  left.instance_id = HostInstancePrefix() + std::to_string(gone);
  left.shutdown_at = std::time(nullptr) + 3600;  // not the controller's to delete yet
  auto client = fake_->Client(io_.get_executor());
  auto made = AwaitOn(io_, client->Request("POST",
                                           "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/"
                                           "default/sandboxclaims",
                                           SandboxClaimJson(left)));
  ASSERT_TRUE(made.ok() && made->status == 201) << (made.ok() ? made->body : "");
  executor_ = Make("code-interpreter-executor:latest");
  AwaitOn(io_, executor_->Check());  // the first health check starts the reaper
  EXPECT_TRUE(RunUntil([&] { return Claims() == 0; })) << "a gone daemon's claim was kept";
}

TEST_P(AgentSandboxTest, RefusedClaimsSayWhatToGrant) {
  // Not the fixture's executor: a fake whose RBAC refuses claims.
  executor_.reset();
  fake_.reset();
  fake_ = std::make_unique<testing_support::FakeApiServer>(
      std::vector<std::string>{"--agent-sandbox", "--deny", "create:sandboxclaims"});
  executor_ = Make("code-interpreter-executor:latest");
  auto s = AwaitOn(io_, executor_->Prepare(Spec()));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("creating a SandboxClaim"));
  EXPECT_THAT(s.status().message(), HasSubstr("sandboxApi: agent-sandbox"));
  EXPECT_THAT(AwaitOn(io_, executor_->Check()).message(), HasSubstr("SandboxClaim"));
}

TEST_P(AgentSandboxTest, AClusterWithoutAgentSandboxIsNamed) {
  executor_.reset();
  fake_.reset();
  fake_ = std::make_unique<testing_support::FakeApiServer>();  // no CRDs, no controller
  executor_ = Make("code-interpreter-executor:latest");
  auto s = AwaitOn(io_, executor_->Prepare(Spec()));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("the agent-sandbox kinds are not served"));
  EXPECT_EQ(s.status().unavailable_reason(), "agent-sandbox");
}

INSTANTIATE_TEST_SUITE_P(Agent, AgentSandboxTest, testing::Values(Mode{false, true, true}));

// Recycled execution pods (issue 36 item 1), as docker's containers (tests/docker/executor_test.cc
// DockerRecycleTest): what one execution leaves is gone for the next one in the same pod, the
// next one's counters are its own, a pod goes back to its client only, and on any doubt it is
// removed. The agent checks and counts inside the pod (its cgroup is not the daemon's to read).
class K8sRecycleTest : public K8sExecutorTest {
 protected:
  // `script` under bash in a sandbox of `spec`, its first line the pod (its hostname is every
  // pod's, "sandbox": the device of its /workspace emptyDir, a tmpfs of its own); then destroyed.
  Execution Execute(const std::string& script, const SandboxSpec& spec = Spec()) {
    Execution e;
    auto sandbox = Prepare(spec);
    if (!sandbox) return e;
    e = Run(*sandbox, {"bash", "-c", "echo pod:$(stat -c %d /workspace); " + script}, std::nullopt,
            {}, 20s, spec.client);
    e.report = AwaitOn(io_, sandbox->Destroy());
    return e;
  }
  static std::string PodOf(const std::string& out) {
    return out.starts_with("pod:") ? out.substr(4, out.find('\n') - 4) : "";
  }
  static std::string AfterPod(const std::string& out) { return out.substr(out.find('\n') + 1); }
  size_t Recycled() {
    for (const BackendMetric& m : executor_->metrics()) {
      if (m.name == "code_interpreter_recycled_pods") return static_cast<size_t>(m.value);
    }
    return 0;
  }
  // The recycle runs in the background after Destroy: until `n` pods wait in the bin.
  void WaitRecycled(size_t n) {
    EXPECT_TRUE(RunUntil([&] { return Recycled() == n; })) << Recycled() << " recycled";
  }
  // Until the pods of the cluster are `n` (a pod not recycled is deleted).
  void WaitPods(int n) {
    EXPECT_TRUE(RunUntil([&] { return PodCount() == n; })) << PodCount() << " pods";
  }
};

TEST_P(K8sRecycleTest, NothingOfAnExecutionReachesTheNext) {
  auto a = Execute(
      "stat -c 'mode %a' /workspace; echo w > /workspace/left; mkdir -p /tmp/d/e; "
      "echo t > /tmp/d/e/f; chmod 0 /tmp/d; echo s > /dev/shm/left 2>/dev/null; "
      "chmod 700 /workspace; ln -s /etc/passwd /workspace/link; ipcmk -M 4096 >/dev/null; "
      "ipcmk -Q >/dev/null; setsid sleep 300 </dev/null >/dev/null 2>&1 & "
      "(trap '' TERM HUP; exec -a hidden sleep 301) </dev/null >/dev/null 2>&1 & echo left");
  ASSERT_TRUE(a.outcome.ok()) << a.outcome.status().message();
  ASSERT_EQ(a.outcome->exit_code, 0) << a.err;
  ASSERT_FALSE(PodOf(a.out).empty()) << a.out;
  WaitRecycled(1);
  auto b = Execute(
      "ls -A /workspace /tmp; ls -A /dev/shm 2>/dev/null; stat -c 'mode %a' /workspace; "
      "for p in /proc/[0-9]*; do [ $p = /proc/1 ] || [ $p = /proc/$$ ] || "
      "echo \"proc $(cat $p/comm)\"; done 2>/dev/null | grep 'proc sleep'; "
      "tail -q -n +2 /proc/sysvipc/shm /proc/sysvipc/msg | wc -l");
  ASSERT_TRUE(b.outcome.ok()) << b.outcome.status().message();
  EXPECT_EQ(PodOf(b.out), PodOf(a.out)) << "the second execution was not recycled";
  const std::string mode = AfterPod(a.out).substr(0, AfterPod(a.out).find('\n') + 1);
  EXPECT_EQ(AfterPod(b.out), "/tmp:\n\n/workspace:\n" + mode + "0\n") << b.err;
}

TEST_P(K8sRecycleTest, EachExecutionHasCountersOfItsOwn) {
  SandboxSpec spec = Spec();
  spec.limits.memory_bytes = 256ull << 20;
  auto a = Execute(
      "python3 -c 'import time\nx = bytearray(150 << 20)\nt = time.process_time()"
      "\nwhile time.process_time() - t < 0.5: pass'; "
      "python3 -c 'x = bytearray(400 << 20)'; :(){ :|:& };: 2>/dev/null; sleep 1",
      spec);
  ASSERT_TRUE(a.outcome.ok()) << a.outcome.status().message();
  EXPECT_TRUE(a.report.oom_killed);
  EXPECT_TRUE(a.report.pids_limit_hit);
  EXPECT_GE(a.report.cpu_ms, 400u);
  WaitRecycled(1);
  auto b = Execute("", spec);
  ASSERT_TRUE(b.outcome.ok()) << b.outcome.status().message();
  ASSERT_EQ(PodOf(b.out), PodOf(a.out)) << "the second execution was not recycled";
  EXPECT_FALSE(b.report.oom_killed);
  EXPECT_FALSE(b.report.pids_limit_hit);
  EXPECT_LT(b.report.cpu_ms, 300u);
  // The pod's memory peak is read-only inside it: the pod's so far, not reset (docs/api.md).
  EXPECT_GE(b.report.memory_peak_bytes, 150ull << 20);
}

TEST_P(K8sRecycleTest, APodIsRecycledForItsClientOnly) {
  SandboxSpec alice = Spec();
  alice.client = "alice";
  SandboxSpec bob = Spec();
  bob.client = "bob";
  auto a = Execute("", alice);
  WaitRecycled(1);
  auto b = Execute("", bob);
  WaitRecycled(2);
  EXPECT_NE(PodOf(b.out), PodOf(a.out)) << "bob ran in alice's pod";
  auto a2 = Execute("", alice);
  auto b2 = Execute("", bob);
  EXPECT_EQ(PodOf(a2.out), PodOf(a.out)) << "alice's pod was not recycled";
  EXPECT_EQ(PodOf(b2.out), PodOf(b.out)) << "bob's pod was not recycled";
  WaitRecycled(2);
  EXPECT_EQ(PodCount(), 2);
}

// What the agent cannot put back for certain (a tree too deep to walk), or a killed sandbox,
// ends the pod.
TEST_P(K8sRecycleTest, APodThatCannotBeWipedOrWasKilledIsRemoved) {
  auto a = Execute("cd /tmp; for i in $(seq 300); do mkdir d; cd d; done");
  ASSERT_TRUE(a.outcome.ok()) << a.outcome.status().message();
  WaitPods(0);
  EXPECT_EQ(Recycled(), 0u);
  auto sandbox = Prepare();
  ASSERT_TRUE(sandbox);
  ASSERT_TRUE(Run(*sandbox, {"true"}).outcome.ok());
  sandbox->Kill();
  AwaitOn(io_, sandbox->Destroy());
  WaitPods(0);
  EXPECT_EQ(Recycled(), 0u);
}

// Python programs of the pool's kind are forked from the pod's fork server
// (src/agent/python_fork_server.h), which outlives recycles, under the runs' rlimits (a pod has
// no container-wide ones: the server's wrapper sets them, and the program's driver its CPU time).
TEST_P(K8sRecycleTest, ProgramsAreForkedFromAServerThatOutlivesRecycles) {
  ASSERT_TRUE(executor_->runs_python_fork_server());
  SandboxSpec spec = Spec();
  spec.prestart_argv = daemon::PythonPrestartArgv({});
  spec.zygote_argv = daemon::PythonZygoteArgv({"json"});
  const std::string main = ::testing::TempDir() + "ci-k8s-fork-" + std::to_string(::getpid());
  // The fork server's pid as the program sees it (tests/docker/executor_test.cc kZygote).
  std::ofstream(main)
      << "import os, resource as r, sys\n"
         "z = [p for p in os.listdir('/proc') if p.isdigit() and p not in ('1', str(os.getpid()))\n"
         "     and b'def _ci_zygote():' in open(f'/proc/{p}/cmdline', 'rb').read()]\n"
         "print(os.getppid(), 'json' in sys.modules, r.getrlimit(r.RLIMIT_CPU),\n"
         "      r.getrlimit(r.RLIMIT_NOFILE), 'server', z)\n";
  const std::string nofile = std::to_string(spec.limits.open_files);
  const std::string limits = ", " + nofile + ")";
  std::vector<std::string> seen;
  for (int i = 0; i < 2; ++i) {
    auto sandbox = Prepare(spec);
    ASSERT_TRUE(sandbox);
    RunPayload p;
    p.argv = spec.prestart_argv;
    p.go = "script 10\n";
    p.files = {{"__main__.py", main}};
    p.timeout = 10s;
    std::string out, err;
    auto r = AwaitOn(io_, sandbox->Run(std::move(p), [&](StreamKind k, std::string_view d) {
      (k == StreamKind::kStdout ? out : err).append(d);
    }));
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->exit_code, 0) << err;
    // The agent reaps the program (its parent is PID 1), forked with json already imported; its
    // CPU time is the go's 10 s from now (whole seconds, rounded up), the hard limit 1 s more.
    const std::string printed = out.substr(0, out.find(" server"));
    EXPECT_THAT(printed, testing::AnyOf("1 True (10, 11) (" + nofile + limits,
                                        "1 True (11, 12) (" + nofile + limits))
        << out << err;
    EXPECT_THAT(out, testing::ContainsRegex("server \\['[0-9]+'\\]\n")) << out;
    AwaitOn(io_, sandbox->Destroy());
    WaitRecycled(1);
    seen.push_back(out.substr(out.find(" server")));
  }
  EXPECT_EQ(PodCount(), 1) << "the second program ran in the first one's pod";
  EXPECT_EQ(seen[0], seen[1]) << "the same fork server served both";
}

INSTANTIATE_TEST_SUITE_P(Agent, K8sRecycleTest, testing::Values(Mode{false, true}));

INSTANTIATE_TEST_SUITE_P(SubprotocolsAndAgent, K8sExecutorTest,
                         testing::Values(Mode{false, false}, Mode{true, false}, Mode{false, true},
                                         Mode{true, true}),
                         [](const testing::TestParamInfo<Mode>& p) {
                           return std::string(p.param.v4 ? "v4" : "v5") +
                                  (p.param.agent ? "_agent" : "_exec");
                         });

// KUBERNETES_SANDBOX_API=agent-sandbox: every case above with the pod a claimed sandbox's.
INSTANTIATE_TEST_SUITE_P(AgentSandbox, K8sExecutorTest, testing::Values(Mode{false, true, true}),
                         [](const testing::TestParamInfo<Mode>&) {
                           return std::string("v5_agent");
                         });

}  // namespace
}  // namespace ci::k8s
