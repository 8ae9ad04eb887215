// Session sandboxes on the Docker backend, against a real dockerd (mirrors
// tests/runtime/session_test.cc): many runs in one container, background programs that survive
// them, leftovers killed after each run, expiry by the container itself, and the reaper.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "common/fd_handover.h"
#include "common/hard_to_kill.h"
#include "common/pending_timer.h"
#include "core/json.h"
#include "docker/reaper.h"
#include "docker_fixture.h"

namespace ci::docker {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// How many `sleep` processes the container runs, not counting PID 1 (the agent, or `sleep` where
// containers are driven by execs).
constexpr const char* kSleepersBesidesPid1 =
    "for p in /proc/[0-9]*; do [ \"$p\" = /proc/1 ] || grep -lx sleep \"$p/comm\"; done "
    "2>/dev/null | wc -l";

class DockerSessionTest : public DockerFixture {
 protected:
  void SetUp() override {
    DockerFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(executor_->supports_sessions());
  }
  void TearDown() override {
    if (sandbox_) Await(sandbox_->Destroy());
    DockerFixture::TearDown();
  }

  static SandboxSpec Spec(int64_t expires_in = 0) {
    SandboxSpec spec;
    spec.env = DefaultSandboxEnv();
    if (expires_in != 0)
      spec.session_expires_at = static_cast<int64_t>(std::time(nullptr)) + expires_in;
    return spec;
  }

  void StartSession(const SandboxSpec& spec = Spec(600)) {
    auto prepared = Await(executor_->Prepare(spec));
    ASSERT_TRUE(prepared.ok()) << prepared.status().message();
    sandbox_ = std::move(prepared.value());
  }

  static RunPayload Shell(const std::string& cmd, std::chrono::milliseconds timeout = 10s) {
    RunPayload p;
    p.argv = {"bash", "-c", cmd};
    p.timeout = timeout;
    return p;
  }
  static RunPayload Python(const std::string& code, std::chrono::milliseconds timeout = 10s) {
    RunPayload p;
    p.argv = {"python3", "-c", code};
    p.timeout = timeout;
    return p;
  }

  struct Call {
    Result<RunOutcome> outcome = Status::Error("not run");
    std::string out, err;
  };
  Call Run(RunPayload payload, Sandbox* sandbox = nullptr) {
    Call c;
    if (sandbox == nullptr) sandbox = sandbox_.get();
    c.outcome = Await(sandbox->Run(std::move(payload), [&](StreamKind k, std::string_view d) {
      (k == StreamKind::kStdout ? c.out : c.err).append(d);
    }));
    return c;
  }

  std::unique_ptr<Sandbox> sandbox_;
};

TEST_F(DockerSessionTest, WorkspaceAndTmpPersistButProcessesDoNot) {
  StartSession();
  Call first = Run(Shell("echo one > /workspace/a; echo two > /tmp/b; sleep 300 & echo started"));
  ASSERT_TRUE(first.outcome.ok()) << first.outcome.status().message();
  EXPECT_EQ(first.outcome->exit_code, 0);
  EXPECT_EQ(first.out, "started\n");
  // Stdin of a later run is fresh too.
  RunPayload second = Shell("cat /workspace/a /tmp/b; cat; " + std::string(kSleepersBesidesPid1));
  second.stdin_data = "input\n";
  Call c = Run(std::move(second));
  ASSERT_TRUE(c.outcome.ok()) << c.outcome.status().message();
  // The first run's `sleep 300` is gone.
  EXPECT_EQ(c.out, "one\ntwo\ninput\n0\n") << c.err;
}

// Issue 30 item 1: what a run leaves is killed whatever its name (newlines, a ')' and a fake
// state in it) or its state (a thread-group leader that ended while its thread runs shows Z).
TEST_F(DockerSessionTest, WhatARunLeavesIsKilledWhateverItsNameOrState) {
  StartSession();
  Call left = Run(Python(testing_support::kHardToKill));
  ASSERT_TRUE(left.outcome.ok()) << left.outcome.status().message();
  ASSERT_EQ(left.outcome->exit_code, 0) << left.err;
  Call count = Run(Python(testing_support::kHardToKillLeft));
  ASSERT_TRUE(count.outcome.ok()) << count.outcome.status().message();
  EXPECT_EQ(count.out, "0\n") << count.err;
}

TEST_F(DockerSessionTest, BackgroundProgramSurvivesRunsAndTimeouts) {
  StartSession();
  RunPayload bg = Shell("echo $$ > /tmp/bg.pid; sleep 200 & exec sleep 300");
  bg.background = true;
  auto t0 = std::chrono::steady_clock::now();
  Call started = Run(std::move(bg));
  ASSERT_TRUE(started.outcome.ok()) << started.outcome.status().message();
  EXPECT_FALSE(started.outcome->exit_code.has_value());
  EXPECT_FALSE(started.outcome->timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);

  Call timed_out = Run(Shell("sleep 30 & setsid sleep 31 & sleep 32", 500ms));
  ASSERT_TRUE(timed_out.outcome.ok()) << timed_out.outcome.status().message();
  EXPECT_TRUE(timed_out.outcome->timed_out);

  Call ended = Run(Shell("(setsid sleep 33 &); sleep 34 & echo done"));
  ASSERT_TRUE(ended.outcome.ok()) << ended.outcome.status().message();
  EXPECT_EQ(ended.out, "done\n");

  Call check =
      Run(Shell("for i in 1 2 3 4 5 6 7 8 9 10; do [ -s /tmp/bg.pid ] && break; sleep 0.1; done;"
                "kill -0 $(cat /tmp/bg.pid) && echo alive; "
                "for f in /proc/[0-9]*/cmdline; do [ $f = /proc/1/cmdline ] && continue; "
                "tr '\\0' ' ' < $f 2>/dev/null; echo; done | "
                "grep '^sleep [0-9]' | sort"));
  ASSERT_TRUE(check.outcome.ok()) << check.outcome.status().message();
  // The background program and its child only; every other run's sleeps are gone.
  EXPECT_EQ(check.out, "alive\nsleep 200 \nsleep 300 \n") << check.err;
}

TEST_F(DockerSessionTest, BackgroundProgramHasNoCpuLimitButRunsDo) {
  SandboxSpec spec = Spec(600);
  spec.limits.cpu_time_sec = 1;
  StartSession(spec);
  RunPayload bg = Shell("ulimit -t > /tmp/bg.cpu; exec sleep 300");
  bg.background = true;
  ASSERT_TRUE(Run(std::move(bg)).outcome.ok());
  Call c = Run(Shell("sleep 0.2; cat /tmp/bg.cpu; ulimit -St; ulimit -Ht"));
  ASSERT_TRUE(c.outcome.ok()) << c.outcome.status().message();
  EXPECT_EQ(c.out, "unlimited\n1\n2\n") << c.err;
  // A spinning run is stopped by its RLIMIT_CPU (SIGXCPU at 1 s), the session goes on.
  Call spin = Run(Python("while True: pass"));
  ASSERT_TRUE(spin.outcome.ok()) << spin.outcome.status().message();
  EXPECT_EQ(spin.outcome->signal, SIGXCPU);
  EXPECT_EQ(Run(Shell("echo ok")).out, "ok\n");
}

TEST_F(DockerSessionTest, BackgroundChildHoldingAPipeDoesNotHoldTheRun) {
  StartSession();
  // A background program's child that inherited a run's stdout (as a persistent interpreter's
  // subprocess would): the run ends soon after its program, not when that child closes the
  // stream (the Engine alone would hold it 2 s).
  RunPayload bg = Python(testing_support::kFdKeeperProgram);
  bg.background = true;
  ASSERT_TRUE(Run(std::move(bg)).outcome.ok());
  for (int i = 0; i < 2; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    Call c = Run(Python(testing_support::kFdHandOverProgram));
    auto took = std::chrono::steady_clock::now() - t0;
    ASSERT_TRUE(c.outcome.ok()) << c.outcome.status().message();
    EXPECT_EQ(c.out, "handed over\n") << c.err;
    EXPECT_EQ(c.outcome->exit_code, 0);
    EXPECT_LT(took, 1800ms) << "i=" << i;
  }
  Call count = Run(Shell(kSleepersBesidesPid1));
  EXPECT_EQ(count.out, "2\n") << "the two background children";
}

// A fork bomb that fills the pids limit and times out: it is killed (by the daemon's kill exec,
// or by the run wrapper's watchdog when the bomb keeps that exec from starting), the background
// program is spared, and later runs start again.
TEST_F(DockerSessionTest, ForkBombTimeoutSparesTheBackgroundProgram) {
  SandboxSpec spec = Spec(600);
  spec.limits.pids = 32;
  StartSession(spec);
  RunPayload bg = Shell("exec sleep 300");
  bg.background = true;
  ASSERT_TRUE(Run(std::move(bg)).outcome.ok());
  auto t0 = std::chrono::steady_clock::now();
  Call bomb =
      Run(Python("import os\nwhile True:\n    try: os.fork()\n    except OSError: pass\n", 1500ms));
  ASSERT_TRUE(bomb.outcome.ok()) << bomb.outcome.status().message();
  EXPECT_TRUE(bomb.outcome->timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 8s);
  Call check = Run(Shell(kSleepersBesidesPid1));
  ASSERT_TRUE(check.outcome.ok()) << check.outcome.status().message();
  EXPECT_EQ(check.out, "1\n") << "the background sleep; " << check.err << " exit "
                              << check.outcome->exit_code.value_or(-1) << " signal "
                              << check.outcome->signal.value_or(-1) << " timed out "
                              << check.outcome->timed_out << " took " << check.outcome->duration_ms;
}

TEST_F(DockerSessionTest, ManyRunsInOneContainerAndCollectBetween) {
  StartSession();
  char dir[] = "/tmp/ci-dsession-collect-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string in = std::string(dir) + "/in";
  for (int i = 0; i < 12; ++i) {
    FILE* f = std::fopen(in.c_str(), "w");
    std::fprintf(f, "%d", i);
    std::fclose(f);
    RunPayload p = Shell("echo -n x >> /workspace/count; wc -c < /workspace/count; cat staged/n");
    p.files = {{"staged/n", in}};
    Call c = Run(std::move(p));
    ASSERT_TRUE(c.outcome.ok()) << i << ": " << c.outcome.status().message();
    EXPECT_EQ(c.out, std::to_string(i + 1) + "\n" + std::to_string(i)) << c.err;
    if (i % 4 == 3) {
      CollectLimits limits;
      limits.dest_dir = dir;
      auto collected = Await(sandbox_->Collect(limits));
      ASSERT_TRUE(collected.ok()) << collected.status().message();
      ASSERT_EQ(collected->files.size(), 2u);
      for (const auto& f : collected->files) {
        if (f.workspace_path == "count") {
          EXPECT_EQ(f.size, static_cast<uint64_t>(i + 1));
        }
        unlink(f.host_path.c_str());
      }
    }
  }
  unlink(in.c_str());
  rmdir(dir);
}

TEST_F(DockerSessionTest, LabelledAsASessionAndEndsByItselfAtExpiry) {
  int64_t expires_at = static_cast<int64_t>(std::time(nullptr)) + 3;
  SandboxSpec spec = Spec();
  spec.session_expires_at = expires_at;
  StartSession(spec);
  Call c = Run(Shell("echo here"));
  ASSERT_TRUE(c.outcome.ok()) << c.outcome.status().message();
  std::string listed = OurContainers("ci-session-");
  EXPECT_THAT(listed, HasSubstr("\"component\":\"session\""));
  EXPECT_THAT(listed,
              HasSubstr("\"code-interpreter.expires-at\":\"" + std::to_string(expires_at) + "\""));
  std::this_thread::sleep_for(4500ms);
  auto outcome = Run(Shell("echo still here"));
  EXPECT_FALSE(outcome.outcome.ok());
}

TEST_F(DockerSessionTest, ExecutionSandboxRefusesBackground) {
  auto prepared = Await(executor_->Prepare(Spec()));
  ASSERT_TRUE(prepared.ok()) << prepared.status().message();
  sandbox_ = std::move(prepared.value());
  RunPayload bg = Shell("true");
  bg.background = true;
  Call c = Run(std::move(bg));
  ASSERT_FALSE(c.outcome.ok());
  EXPECT_THAT(c.outcome.status().message(), HasSubstr("session"));
  EXPECT_EQ(Run(Shell("echo fine")).out, "fine\n");
}

// A previous daemon's session (owner gone, expiry in the future) is removed by the first check
// of a new executor; an expired session container by any sweep; a live daemon's is kept.
TEST_F(DockerSessionTest, ReaperRemovesExpiredSessionsAndThoseOfADeadDaemon) {
  auto c = Client();
  auto create = [&](const std::string& name, const std::string& owner, int64_t expires_at) {
    std::string m = "POST", p = "/containers/create?name=" + name,
                body = "{\"Image\":\"" + opts_.image +
                       "\",\"Cmd\":[\"sleep\",\"infinity\"],\"Labels\":{\"app\":"
                       "\"code-interpreter\",\"component\":\"session\","
                       "\"code-interpreter.owner\":\"" +
                       owner + "\",\"code-interpreter.expires-at\":\"" +
                       std::to_string(expires_at) + "\"}}";
    auto r = Await(c->Request(m, p, body));
    EXPECT_TRUE(r.ok() && r->status == 201) << (r.ok() ? r->body : r.status().message());
  };
  std::string suffix = std::to_string(::getpid());
  int64_t future = static_cast<int64_t>(std::time(nullptr)) + 3600;
  const std::string here = OwnerPrefixHere();
  create("ci-sreap-dead-" + suffix, here + "2147483632", future);
  create("ci-sreap-expired-" + suffix, here + "1", 1000);
  create("ci-sreap-alive-" + suffix, here + "1", future);
  auto fresh = MakeDockerExecutor(io_.get_executor(), opts_);
  ASSERT_TRUE(Await(fresh->Check()).ok());
  RunUntil([&] {  // the sweep runs detached from the check
    return OurContainers("ci-sreap-dead-").empty() && OurContainers("ci-sreap-expired-").empty();
  });
  EXPECT_EQ(OurContainers("ci-sreap-dead-"), "");
  EXPECT_EQ(OurContainers("ci-sreap-expired-"), "");
  EXPECT_NE(OurContainers("ci-sreap-alive-"), "");
  std::string m = "DELETE", p = "/containers/ci-sreap-alive-" + suffix + "?force=1";
  Await(c->Request(m, p));
}

// A real session container the reaper finds expired (it stopped by itself) is removed.
TEST_F(DockerSessionTest, ReaperRemovesAnExpiredSessionContainer) {
  SandboxSpec spec = Spec(2);
  StartSession(spec);
  ASSERT_TRUE(Run(Shell("true")).outcome.ok());
  std::this_thread::sleep_for(3500ms);
  // (Another daemon's sweep on a shared dockerd may have removed it already: that is fine too.)
  auto fresh = MakeDockerExecutor(io_.get_executor(), opts_);
  ASSERT_TRUE(Await(fresh->Check()).ok());
  // Other tests' sessions may exist concurrently: only look for ours being gone.
  const std::string ours =
      "\"code-interpreter.expires-at\":\"" + std::to_string(spec.session_expires_at) + "\"";
  RunUntil([&] { return OurContainers("ci-session-").find(ours) == std::string::npos; });
  std::string listed = OurContainers("ci-session-");
  EXPECT_THAT(listed, ::testing::Not(HasSubstr("\"code-interpreter.expires-at\":\"" +
                                               std::to_string(spec.session_expires_at) + "\"")));
  Await(sandbox_->Destroy());  // already gone: must not fail or hang
  sandbox_.reset();
}

// Issue 34 item 1: Freeze pauses the session's container (the Engine's pause, the cgroup
// freezer). Watched from the host through /proc/<PID 1>/root (the sandbox's own runs are refused
// while it is paused), so these need the local Engine the suite runs against.
class DockerFreezeTest : public DockerSessionTest {
 protected:
  // `agent`: the agent as PID 1 (what a session with egress gets: AgentContainer).
  void StartWatchedSession(bool agent = false) {
    SandboxSpec spec = Spec(600);
    spec.egress = agent;
    StartSession(spec);
    if (HasFatalFailure()) return;
    rapidjson::Document doc;
    std::string why;
    ASSERT_TRUE(ParseJson(OurContainers("ci-session-", true), doc, why)) << why;
    ASSERT_TRUE(doc.IsArray() && doc.Size() == 1 && doc[0]["Id"].IsString());
    id_ = doc[0]["Id"].GetString();
    ASSERT_TRUE(Inspect(doc));
    root_ = "/proc/" + std::to_string(doc["State"]["Pid"].GetInt()) + "/root/workspace/";
    if (!std::filesystem::exists(root_)) GTEST_SKIP() << "the Engine's containers are not here";
  }
  // GET /containers/{id}/json; false when it failed (404: removed).
  bool Inspect(rapidjson::Document& doc) {
    auto c = Client();
    std::string m = "GET", p = "/containers/" + id_ + "/json", why;
    auto r = Await(c->Request(m, p));
    return r.ok() && r->ok() && ParseJson(r->body, doc, why) && doc.IsObject();
  }
  bool Paused() {
    rapidjson::Document doc;
    return Inspect(doc) && doc["State"]["Paused"].GetBool();
  }
  std::string Workspace(const std::string& name) {
    std::ifstream in(root_ + name);
    std::stringstream ss;
    ss << in.rdbuf();  // "" when missing
    return ss.str();
  }
  // A background program writing 1, 2, 3, ... into /workspace/count every 10 ms.
  void StartCounter() {
    RunPayload counter = Shell(
        "i=0; while :; do i=$((i+1)); echo $i > /workspace/count.tmp; "
        "mv /workspace/count.tmp /workspace/count; sleep 0.01; done");
    counter.background = true;
    Call c = Run(std::move(counter));
    ASSERT_TRUE(c.outcome.ok()) << c.outcome.status().message();
    for (int i = 0; i < 500 && Workspace("count").empty(); ++i) std::this_thread::sleep_for(10ms);
    ASSERT_NE(Workspace("count"), "") << "the counter did not start";
  }
  bool CountAdvances(const std::string& past) {
    for (int i = 0; i < 1000; ++i) {
      std::string now = Workspace("count");
      if (!now.empty() && now != past) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  double Timed(bool frozen) {
    const auto t0 = std::chrono::steady_clock::now();
    Status s = Await(sandbox_->Freeze(frozen));
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - t0;
    EXPECT_TRUE(s.ok()) << s.message();
    return took.count();
  }
  std::string id_;
  std::string root_;  // the container's /workspace/ seen from the host
};

TEST_F(DockerFreezeTest, NothingRunsWhilePausedAndEverythingGoesOnAfter) {
  StartWatchedSession();
  ASSERT_NO_FATAL_FAILURE(StartCounter());
  auto start = [this](const std::string& command) {
    RunPayload timer = Shell(command);
    timer.background = true;
    return Run(std::move(timer)).outcome.ok();
  };
  auto freeze = [this] { std::cout << "freeze (docker pause): " << Timed(true) << " ms\n"; };
  auto timer = testing_support::FreezeWithPendingTimer(start, freeze, [this] { Timed(false); });
  ASSERT_TRUE(timer) << "no timer was still pending when the pause completed";
  const std::string fired = timer->name;
  EXPECT_TRUE(Paused());

  const std::string frozen_at = Workspace("count");
  std::this_thread::sleep_for(timer->FrozenLongEnough());
  EXPECT_EQ(Workspace("count"), frozen_at) << "the counter ran while paused";
  EXPECT_FALSE(std::filesystem::exists(root_ + fired)) << "the timer fired while paused";
  Call refused = Run(Shell("true"));
  ASSERT_FALSE(refused.outcome.ok());
  EXPECT_THAT(refused.outcome.status().message(), HasSubstr("frozen"));

  std::cout << "thaw (docker unpause): " << Timed(false) << " ms\n";
  EXPECT_FALSE(Paused());
  EXPECT_TRUE(CountAdvances(frozen_at)) << "the counter did not go on after the unpause";
  Call after = Run(Shell("for i in $(seq 100); do [ -e /workspace/" + fired +
                         " ] && break; sleep 0.1; done; ls /workspace/" + fired));
  ASSERT_TRUE(after.outcome.ok()) << after.outcome.status().message();
  EXPECT_EQ(after.out, "/workspace/" + fired + "\n") << after.err;
}

TEST_F(DockerFreezeTest, PausingTwiceAndUnpausingWhatRunsAreHarmless) {
  StartWatchedSession();
  ASSERT_NO_FATAL_FAILURE(StartCounter());
  Timed(false);  // never paused: the Engine answers 500 "is not paused"
  Timed(true);
  Timed(true);  // 409 "already paused"
  EXPECT_TRUE(Paused());
  const std::string frozen_at = Workspace("count");
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(Workspace("count"), frozen_at);
  Timed(false);
  Timed(false);
  EXPECT_TRUE(CountAdvances(frozen_at));
  Call c = Run(Shell("echo ok"));
  ASSERT_TRUE(c.outcome.ok()) << c.outcome.status().message();
  EXPECT_EQ(c.out, "ok\n");
}

// With the agent as PID 1 (a session with egress) the Engine pauses it with the rest.
TEST_F(DockerFreezeTest, AgentAsPid1IsPausedWithTheRest) {
  StartWatchedSession(/*agent=*/true);
  EXPECT_THAT(Run(Shell("tr '\\0' ' ' < /proc/1/cmdline")).out, HasSubstr("agent"));
  ASSERT_NO_FATAL_FAILURE(StartCounter());
  Timed(true);
  EXPECT_TRUE(Paused());
  const std::string frozen_at = Workspace("count");
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(Workspace("count"), frozen_at) << "the counter ran while paused";
  Timed(false);
  EXPECT_TRUE(CountAdvances(frozen_at));
  Call c = Run(Shell("echo ok"));
  ASSERT_TRUE(c.outcome.ok()) << c.outcome.status().message();
  EXPECT_EQ(c.out, "ok\n");
  Timed(true);
  sandbox_->Kill();
  Await(sandbox_->Destroy());
  Await(executor_->Drain());
  sandbox_.reset();
  rapidjson::Document doc;
  EXPECT_FALSE(Inspect(doc)) << "container " << id_ << " is left";
}

// Destroy's removal (DELETE ?force=1) and Kill's POST /kill work on a paused container.
TEST_F(DockerFreezeTest, DestroyAndKillOfAPausedSessionLeaveNothing) {
  for (bool kill_first : {false, true}) {
    SCOPED_TRACE(kill_first ? "Kill, then Destroy" : "Destroy");
    StartWatchedSession();
    ASSERT_NO_FATAL_FAILURE(StartCounter());
    Timed(true);
    ASSERT_TRUE(Paused());
    const auto t0 = std::chrono::steady_clock::now();
    if (kill_first) sandbox_->Kill();
    Await(sandbox_->Destroy());
    Await(executor_->Drain());  // the removal runs after Destroy's answer
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
    sandbox_.reset();
    rapidjson::Document doc;
    EXPECT_FALSE(Inspect(doc)) << "container " << id_ << " is left";
  }
}

}  // namespace
}  // namespace ci::docker
