#include "daemon/service/verdict.h"

#include <gtest/gtest.h>

#include <csignal>

namespace ci::daemon {
namespace {

RunOutcome ExitedWith(int code) {
  RunOutcome r;
  r.exit_code = code;
  return r;
}
RunOutcome Signaled(int sig, uint64_t cpu_ms = 0) {
  RunOutcome r;
  r.signal = sig;
  r.cpu_ms = cpu_ms;
  return r;
}

TEST(Verdict, SuccessAndPlainFailure) {
  EXPECT_EQ(VerdictName(ComputeVerdict(ExitedWith(0), {}, false, 5)), "ok");
  EXPECT_EQ(VerdictName(ComputeVerdict(ExitedWith(1), {}, false, 5)), "error");
  EXPECT_EQ(VerdictName(ComputeVerdict(ExitedWith(0), {}, true, 5)), "output_limit");
  EXPECT_EQ(VerdictName(ComputeVerdict(ExitedWith(3), {}, true, 5)), "output_limit");
}

TEST(Verdict, LimitsExplainFailures) {
  ResourceReport oom;
  oom.oom_killed = true;
  EXPECT_EQ(VerdictName(ComputeVerdict(Signaled(SIGKILL), oom, false, 5)), "memory_limit");
  ResourceReport pids;
  pids.pids_limit_hit = true;
  RunOutcome timed_out;
  timed_out.timed_out = true;
  EXPECT_EQ(VerdictName(ComputeVerdict(timed_out, pids, false, 5)), "pids_limit");
  EXPECT_EQ(VerdictName(ComputeVerdict(timed_out, {}, false, 5)), "timed_out");
  EXPECT_EQ(VerdictName(ComputeVerdict(Signaled(SIGXCPU), {}, false, 5)), "cpu_limit");
  EXPECT_EQ(VerdictName(ComputeVerdict(Signaled(SIGKILL, 6000), {}, false, 5)), "cpu_limit");
  EXPECT_EQ(VerdictName(ComputeVerdict(Signaled(SIGKILL, 10), {}, false, 5)), "killed");
  EXPECT_EQ(VerdictName(ComputeVerdict(Signaled(SIGSEGV), {}, false, 5)), "killed");
}

TEST(Verdict, ARefusedForkInAProgramThatSucceededIsOk) {
  ResourceReport pids;
  pids.pids_limit_hit = true;
  EXPECT_EQ(VerdictName(ComputeVerdict(ExitedWith(0), pids, false, 5)), "ok");
}

TEST(Verdict, AnOomKilledChildIsReportedEvenWhenTheProgramSucceeded) {
  ResourceReport oom;
  oom.oom_killed = true;
  EXPECT_EQ(VerdictName(ComputeVerdict(ExitedWith(0), oom, false, 5)), "memory_limit");
}

TEST(Verdict, AFailedProgramThatHitThePidsLimitIsPidsLimitEvenWithAnOomKill) {
  // A fork bomb on cgroup v2: its churning processes' kernel memory can reach memory.max too.
  ResourceReport both;
  both.pids_limit_hit = true;
  both.oom_killed = true;
  EXPECT_EQ(VerdictName(ComputeVerdict(ExitedWith(1), both, false, 5)), "pids_limit");
  EXPECT_EQ(VerdictName(ComputeVerdict(Signaled(SIGKILL), both, false, 5)), "pids_limit");
  EXPECT_EQ(VerdictName(ComputeVerdict(ExitedWith(0), both, false, 5)), "memory_limit");
}

}  // namespace
}  // namespace ci::daemon
