// The agent loop's text handling: the program taken out of a model's answer, the stderr that is
// noise, and the verdict on a run.
#include <gtest/gtest.h>

#include "daemon/tools/program_extraction.h"
#include "daemon/tools/solve_loop.h"
#include "daemon/tools/stderr_noise.h"

namespace ci::daemon {
namespace {

TEST(ExtractProgram, AnAnswerWithoutFencesIsTheProgram) {
  EXPECT_EQ(ExtractProgram("\n\nprint(1)\nprint(2)\n\n", "python"), "print(1)\nprint(2)");
  EXPECT_EQ(ExtractProgram("  x = 1\n", "python"), "  x = 1");  // indentation kept
  EXPECT_EQ(ExtractProgram(" \n\t\n", "python"), "");
}

TEST(ExtractProgram, ProseAroundAFencedBlockIsDropped) {
  EXPECT_EQ(
      ExtractProgram("Here is the program:\n```python\nprint(42)\n```\nIt prints 42.", "python"),
      "print(42)");
  EXPECT_EQ(ExtractProgram("~~~\necho hi\n~~~", "bash"), "echo hi");
}

TEST(ExtractProgram, TheBlockOfTheLanguageWinsOverOthers) {
  const char* answer =
      "Run it with:\n```sh\ngo run main.go\n```\nThe code:\n```go\npackage main\n\nfunc main() "
      "{}\n```\n";
  EXPECT_EQ(ExtractProgram(answer, "go"), "package main\n\nfunc main() {}");
  EXPECT_EQ(ExtractProgram("```py\nprint(1)\n```", "python"), "print(1)");
  EXPECT_EQ(ExtractProgram("```golang\npackage main\n```", "go"), "package main");
  EXPECT_EQ(ExtractProgram("```js\nconsole.log(1)\n```", "javascript"), "console.log(1)");
  EXPECT_EQ(ExtractProgram("```Python3\nprint(3)\n```", "python"), "print(3)");
}

TEST(ExtractProgram, WithoutABlockOfTheLanguageTheFirstBlockIsTaken) {
  EXPECT_EQ(ExtractProgram("```\nprint(1)\n```\n```text\nout\n```", "python"), "print(1)");
}

TEST(ExtractProgram, AnUnterminatedFenceRunsToTheEnd) {
  EXPECT_EQ(ExtractProgram("```python\nprint(1)\nprint(2)", "python"), "print(1)\nprint(2)");
}

TEST(ExtractProgram, ALongerFenceHoldsShorterOnes) {
  const char* answer = "````markdown\n```python\nx\n```\n````";
  EXPECT_EQ(ExtractProgram(answer, "python"), "```python\nx\n```");
}

TEST(WithoutNoise, PythonWarningsAndTheirSourceLinesGo) {
  std::string err =
      "/workspace/__main__.py:3: DeprecationWarning: old\n  import imp\n"
      "/usr/lib/python3/dist-packages/x.py:10: UserWarning: careful\n  warn('careful')\n";
  EXPECT_EQ(WithoutNoise(err), "");
}

TEST(WithoutNoise, ATracebackStays) {
  std::string err =
      "Traceback (most recent call last):\n  File \"/workspace/__main__.py\", line 1, in "
      "<module>\nZeroDivisionError: division by zero\n";
  EXPECT_EQ(WithoutNoise(err), err);
  // A warning raised as an error is a failure: it has no "file:line:" in front.
  EXPECT_EQ(WithoutNoise("UserWarning: raised\n"), "UserWarning: raised\n");
}

TEST(WithoutNoise, AnErrorAfterAWarningStays) {
  EXPECT_EQ(WithoutNoise("a.py:1: SyntaxWarning: x\n  y\nNameError: z\n"), "NameError: z\n");
}

TEST(WithoutNoise, NodeWarningsAndGoInfoLinesGo) {
  EXPECT_EQ(WithoutNoise("(node:12) ExperimentalWarning: fetch is experimental\n(Use `node "
                         "--trace-warnings ...` to show where the warning was created)\n"),
            "");
  EXPECT_EQ(WithoutNoise("go: downloading example.com/x v1.0.0\ngo: warning: \"x\" matched\n"), "");
  EXPECT_EQ(WithoutNoise("# command-line-arguments\n./main.go:3:2: undefined: x\n"),
            "# command-line-arguments\n./main.go:3:2: undefined: x\n");
}

ProgramResult Exited(int code, std::string stderr_text = "", std::string verdict = "ok") {
  ProgramResult r;
  r.exit_code = code;
  r.stderr_text = std::move(stderr_text);
  r.verdict = std::move(verdict);
  return r;
}

TEST(JudgeRun, ASilentSuccessIsAccepted) {
  EXPECT_EQ(JudgeRun(Exited(0), 1000), "");
  EXPECT_EQ(JudgeRun(Exited(0, "x.py:1: FutureWarning: f\n  g()\n"), 1000), "");
}

TEST(JudgeRun, EachFailureIsNamed) {
  EXPECT_EQ(JudgeRun(Exited(1, "boom\n", "error"), 1000), "it exited with code 1");
  EXPECT_EQ(JudgeRun(Exited(0, "oops\n"), 1000), "it wrote errors to stderr");
  EXPECT_EQ(JudgeRun(Exited(0, "", "output_limit"), 1000),
            "its output was cut at the sandbox's output limit");
  ProgramResult timeout;
  timeout.timed_out = true;
  timeout.verdict = "timeout";
  EXPECT_EQ(JudgeRun(timeout, 1500), "it timed out after 1500 ms");
  ProgramResult oom;
  oom.signal = 9;
  oom.verdict = "memory_limit";
  EXPECT_EQ(JudgeRun(oom, 1000), "it hit the sandbox's limit (memory_limit)");
  ProgramResult killed;
  killed.signal = 11;
  killed.verdict = "killed";
  EXPECT_EQ(JudgeRun(killed, 1000), "it was killed by signal 11");
}

TEST(DefaultSolveTimeout, GoGetsTimeForItsBuild) {
  EXPECT_EQ(DefaultSolveTimeoutMs("python"), 10000);
  EXPECT_EQ(DefaultSolveTimeoutMs("go"), 20000);
}

}  // namespace
}  // namespace ci::daemon
