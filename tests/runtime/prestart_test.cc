// Pre-started programs (SandboxSpec::prestart_argv, RunPayload::go) through real sandboxes: the
// program is up before the run, gets the go line and then the run's stdin, its CPU before the go
// is not the run's (nor held against the run's limit), and one that died while it waited is
// reported as a sandbox gone before the program started (the service then uses another one).
#include <gmock/gmock.h>

#include <thread>

#include "sandbox_fixture.h"

namespace ci::testing_support {
namespace {

using namespace std::chrono_literals;

class PrestartTest : public SandboxTest {
 protected:
  static SandboxSpec PrestartSpec(double burn);
};

// Burns `burn` seconds of CPU, writes a mark into /tmp (so the run can tell it was started
// ahead), says it is ready, then reads its go line and the rest of stdin.
SandboxSpec PrestartTest::PrestartSpec(double burn) {
  SandboxSpec spec = DefaultSpec();
  spec.prestart_argv = {
      "python3", "-c",
      "import os, sys, time\n"
      "t = time.process_time()\n"
      "while time.process_time() - t < " +
          std::to_string(burn) +
          ": pass\n"
          "open('/tmp/started-ahead', 'w').write(str(os.getpid()))\n"
          "os.write(3, b'r')\n"
          "os.close(3)\n"
          "go = b''\n"
          "while not go.endswith(b'\\n'):\n"
          "    b = os.read(0, 1)\n"
          "    if not b: sys.exit(9)\n"
          "    go += b\n"
          "print('go:', go.decode().strip(), 'pid:', open('/tmp/started-ahead').read())\n"
          "print('stdin:', sys.stdin.read())\n"
          "t = time.process_time()\n"
          "while time.process_time() - t < 0.05: pass\n"};
  return spec;
}

RunPayload Go(std::string go, std::optional<std::string> stdin_data = std::nullopt) {
  RunPayload p;
  p.argv = {"false"};  // never started: the pre-started program is the run's
  p.go = std::move(go);
  p.stdin_data = std::move(stdin_data);
  p.timeout = 10s;
  return p;
}

TEST_F(PrestartTest, APrestartedProgramRunsAtItsGoWithTheRunsStdin) {
  Execution ex = Execute(PrestartSpec(0), Go("hello 1\n", "the input"));
  ASSERT_TRUE(ex.outcome && ex.outcome->ok()) << ex.outcome->status().message();
  EXPECT_EQ((*ex.outcome)->exit_code, 0) << ex.err;
  EXPECT_THAT(ex.out, ::testing::MatchesRegex("go: hello 1 pid: [0-9]+\nstdin: the input\n"));
}

TEST_F(PrestartTest, CpuBeforeTheGoIsNotTheRuns) {
  // 0.4 s burnt while waiting (warm imports), 0.05 s after the go.
  Execution ex = Execute(PrestartSpec(0.4), Go("x 1\n"));
  ASSERT_TRUE(ex.outcome && ex.outcome->ok()) << ex.outcome->status().message();
  EXPECT_EQ((*ex.outcome)->exit_code, 0) << ex.err;
  EXPECT_GE((*ex.outcome)->cpu_ms, 40u);
  EXPECT_LT((*ex.outcome)->cpu_ms, 300u);
  if (!WithoutCgroup()) {
    EXPECT_LT(ex.report.cpu_ms, 300u);  // the cgroup figure too
  }
}

TEST_F(PrestartTest, APrestartedProgramMayUseMoreThanTheCpuLimitBeforeItsGo) {
  SandboxSpec spec = PrestartSpec(1.3);
  spec.limits.cpu_time_sec = 1;  // below what the waiting program burns
  Execution ex = Execute(spec, Go("x 1\n"));
  ASSERT_TRUE(ex.outcome && ex.outcome->ok()) << ex.outcome->status().message();
  EXPECT_EQ((*ex.outcome)->exit_code, 0) << ex.err;
  EXPECT_FALSE((*ex.outcome)->signal.has_value());
}

TEST_F(PrestartTest, APrestartedProgramThatEndedIsASandboxGoneBeforeTheRun) {
  SandboxSpec spec = DefaultSpec();
  spec.prestart_argv = {"sh", "-c", "echo >&3; exit 3"};
  auto prepared = Await(executor_->Prepare(spec));
  ASSERT_TRUE(prepared.ok()) << prepared.status().message();
  auto sandbox = std::move(prepared.value());
  std::this_thread::sleep_for(200ms);  // it has exited by now
  auto outcome = Await(sandbox->Run(Go("x 1\n"), [](StreamKind, std::string_view) {}));
  Await(sandbox->Destroy());
  ASSERT_FALSE(outcome.ok());
  EXPECT_TRUE(outcome.status().gone());
  EXPECT_TRUE(outcome.status().not_started());
  EXPECT_THAT(outcome.status().message(), ::testing::HasSubstr("exit status 3"));
}

TEST_F(PrestartTest, AProgramThatEndsBeforeItIsReadyFailsThePrepare) {
  SandboxSpec spec = DefaultSpec();
  spec.prestart_argv = {"sh", "-c", "exit 4"};
  auto prepared = Await(executor_->Prepare(spec));
  ASSERT_FALSE(prepared.ok());
  EXPECT_THAT(prepared.status().message(),
              ::testing::HasSubstr("ended before it was ready (exit status 4)"));
}

TEST_F(PrestartTest, APrestartedSandboxTakesOnlyAGoRun) {
  auto prepared = Await(executor_->Prepare(PrestartSpec(0)));
  ASSERT_TRUE(prepared.ok()) << prepared.status().message();
  auto sandbox = std::move(prepared.value());
  auto outcome = Await(sandbox->Run(Shell("echo no"), [](StreamKind, std::string_view) {}));
  Await(sandbox->Destroy());
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.status().message(), ::testing::HasSubstr("waits for a go"));
}

TEST_F(PrestartTest, AGoWithoutAPrestartedProgramStartsArgvWithTheGoOnStdin) {
  RunPayload p = Shell("read -r go; echo \"go=$go\"; cat");
  p.go = "now 5\n";
  p.stdin_data = "rest";
  Execution ex = Execute(DefaultSpec(), std::move(p));
  ASSERT_TRUE(ex.outcome && ex.outcome->ok()) << ex.outcome->status().message();
  EXPECT_EQ(ex.out, "go=now 5\nrest");
}

TEST_F(PrestartTest, APrestartedProgramIsKilledAtTheTimeoutLikeAnyOther) {
  SandboxSpec spec = DefaultSpec();
  spec.prestart_argv = {"sh", "-c", "echo >&3; exec 3>&-; read -r go; sleep 30 & sleep 30"};
  RunPayload p = Go("x 1\n");
  p.timeout = 300ms;
  Execution ex = Execute(spec, std::move(p));
  ASSERT_TRUE(ex.outcome && ex.outcome->ok()) << ex.outcome->status().message();
  EXPECT_TRUE((*ex.outcome)->timed_out);
  EXPECT_LT(ex.run_ms, 3000);
}

}  // namespace
}  // namespace ci::testing_support
