// The shell the Docker sandbox runs (sandbox_shell.h), the files that travel in its argv
// (staging.h's InlineFiles) and the call frame (call_output.h): golden argv for each exec, and
// the inline-file writer run by the host's bash. No dockerd needed (suite unit, docker-pure).
#include "container/sandbox_shell.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/run_in.h"
#include "container/call_output.h"
#include "container/staging.h"

namespace ci::docker {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// The texts as they must reach the container, written out here so that a change to a script is
// a change to this test too.
constexpr const char* kWriter =
    "n=$1; shift; while [ \"$n\" -gt 0 ]; do { [ ! -L \"$1\" ] || rm -f -- \"$1\"; } && "
    "printf %s \"$2\" > \"$1\" || exit 126; shift 2; n=$((n - 1)); done; "
    "exec /bin/bash -c \"$0\" ci-run \"$@\"";
constexpr const char* kExecutionWrapper = "\"$@\"; s=$?; kill -9 -1 2>/dev/null; exit $s";

std::string SessionWrapper() {
  return std::string(container::kSessionKillFunction) + std::string(container::kSessionRunScript);
}

TEST(SandboxShell, ExecutionProgramUnderTheKillingWrapper) {
  container::ProgramExec exec;
  exec.program = {"python3", "-u", "main.py"};
  EXPECT_THAT(container::ProgramArgv(exec), ElementsAre("/bin/bash", "-c", kExecutionWrapper,
                                                        "ci-run", "python3", "-u", "main.py"));
}

TEST(SandboxShell, InlinedFilesAreWrittenFirstThenTheWrapperIsExecd) {
  container::ProgramExec exec;
  exec.program = {"python3", "__main__.py"};
  exec.inline_files = {"__main__.py", "print(1)\n", "data.txt", ""};
  EXPECT_THAT(container::ProgramArgv(exec),
              ElementsAre("/bin/bash", "-c", kWriter, kExecutionWrapper, "2", "__main__.py",
                          "print(1)\n", "data.txt", "", "python3", "__main__.py"));
}

TEST(SandboxShell, SessionWrapperTakesTheSparedListCpuAndWatchdogSecondsFirst) {
  container::ProgramExec exec;
  exec.program = {"sh", "-c", "echo hi"};
  exec.session = true;
  exec.background = container::BackgroundList({12, 345});
  exec.cpu_time_sec = 7;
  exec.watchdog_ms = 2005;
  EXPECT_THAT(container::ProgramArgv(exec),
              ElementsAre("/bin/bash", "-c", SessionWrapper(), "ci-run", "12 345", "7", "2.005",
                          "sh", "-c", "echo hi"));
  exec.inline_files = {"a.py", "x = 1"};
  EXPECT_THAT(container::ProgramArgv(exec),
              ElementsAre("/bin/bash", "-c", kWriter, SessionWrapper(), "1", "a.py", "x = 1",
                          "12 345", "7", "2.005", "sh", "-c", "echo hi"));
}

TEST(SandboxShell, BackgroundKillAndInitArgv) {
  EXPECT_THAT(container::BackgroundStartArgv({"python3", "srv.py"}),
              ElementsAre("/bin/bash", "-c", container::kStartBackgroundScript, "ci-bg", "python3",
                          "srv.py"));
  EXPECT_THAT(container::KillArgv(nullptr), ElementsAre("/bin/sh", "-c", "kill -9 -1"));
  const std::string spared = "12 345";
  EXPECT_THAT(
      container::KillArgv(&spared),
      ElementsAre("/bin/bash", "-c", "bg=$1; " + std::string(container::kSessionKillFunction) + "k",
                  "ci-kill", "12 345"));
  EXPECT_THAT(container::ContainerInitArgv(std::nullopt),
              ElementsAre("/bin/bash", "-c", "trap '' CHLD; exec sleep infinity"));
  EXPECT_THAT(container::ContainerInitArgv(90),
              ElementsAre("/bin/bash", "-c", "trap '' CHLD; exec sleep 90"));
  EXPECT_EQ(container::BackgroundList({}), "");
  EXPECT_EQ(container::BackgroundList({7}), "7");
}

TEST(SandboxShell, ExitStatusAsTheEngineReportsIt) {
  auto outcome = [](std::optional<int> status) {
    RunOutcome out;
    container::SetExitStatus(status, out);
    return std::make_pair(out.exit_code, out.signal);
  };
  using Pair = std::pair<std::optional<int>, std::optional<int>>;
  EXPECT_EQ(outcome(0), Pair(0, std::nullopt));
  EXPECT_EQ(outcome(128), Pair(128, std::nullopt));
  EXPECT_EQ(outcome(129), Pair(std::nullopt, SIGHUP));
  EXPECT_EQ(outcome(137), Pair(std::nullopt, SIGKILL));
  EXPECT_EQ(outcome(192), Pair(std::nullopt, 64));
  EXPECT_EQ(outcome(193), Pair(193, std::nullopt));
  EXPECT_EQ(outcome(std::nullopt), Pair(std::nullopt, std::nullopt));
}

// A directory under /tmp, removed at the end.
class TempDir {
 public:
  TempDir() {
    char dir[] = "/tmp/sandbox-shell-test-XXXXXX";
    EXPECT_NE(mkdtemp(dir), nullptr);
    path_ = dir;
  }
  ~TempDir() { std::system(("rm -rf " + path_).c_str()); }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& content) const {
    std::string file = path_ + "/" + name;
    std::ofstream(file, std::ios::binary) << content;
    return file;
  }
  std::string Read(const std::string& name) const {
    std::ifstream in(path_ + "/" + name, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string path_;
};

using testing_support::Ran;
using testing_support::RunIn;

// The writer's half for real, with a harmless wrapper in place of the killing one: the files
// land byte for byte, then the wrapper gets the program's argv.
TEST(SandboxShell, TheHostsBashWritesInlinedFilesExactlyAndRunsTheProgram) {
  TempDir work;
  const std::string tricky = "-n 'quoted' \"$HOME\" `id` %s\\n\n\ttrailing \n\n";
  const std::vector<std::string> files = {"a.txt", tricky, "empty", "", "-dash", "x"};
  std::vector<std::string> argv = container::InlineFilesArgv("\"$@\"", files);
  for (const char* a : {"/bin/sh", "-c", "cat a.txt empty -- -dash; echo \"[$1]\"", "sh", "$1 *"}) {
    argv.push_back(a);
  }
  Ran ran = RunIn(work.path(), argv);
  EXPECT_EQ(ran.status, 0);
  EXPECT_EQ(ran.out, tricky + "x[$1 *]\n");
  EXPECT_EQ(work.Read("a.txt"), tricky);
  EXPECT_EQ(work.Read("-dash"), "x");
}

// A symbolic link where a file goes is replaced, as tar replaces it, never written through
// (issue #30 item 8: a session's own link to /tmp/t had the staged bytes written into /tmp/t).
TEST(SandboxShell, TheWriterReplacesASymlinkInsteadOfFollowingIt) {
  TempDir work;
  const std::string target = work.Write("target", "orig");
  ASSERT_EQ(::symlink(target.c_str(), (work.path() + "/link").c_str()), 0);
  std::vector<std::string> argv = container::InlineFilesArgv("\"$@\"", {"link", "staged"});
  argv.push_back("/bin/true");
  Ran ran = RunIn(work.path(), argv);
  EXPECT_EQ(ran.status, 0) << ran.out;
  EXPECT_EQ(work.Read("target"), "orig") << "written through the link";
  EXPECT_EQ(work.Read("link"), "staged");
  struct stat st {};
  ASSERT_EQ(::lstat((work.path() + "/link").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST(SandboxShell, AFileThatCannotBeWrittenIsExitStatus126) {
  TempDir work;
  std::vector<std::string> argv = container::InlineFilesArgv("\"$@\"", {"missing-dir/a", "x"});
  argv.push_back("/bin/echo");
  argv.push_back("ran");
  Ran ran = RunIn(work.path(), argv);
  EXPECT_EQ(ran.status, 126);
  EXPECT_EQ(ran.out, "") << "the program must not run";
}

// The kernel quotas a pod's run wrapper sets, read back by the program it runs.
TEST(SandboxShell, RunLimitsReachTheProgram) {
  TempDir work;
  SandboxLimits limits;
  limits.cpu_time_sec = 7;
  limits.open_files = 200;
  limits.queued_signals = 300;
  limits.message_queue_bytes = 4096;
  limits.locked_memory_bytes = 64 << 10;
  const char* report =
      "echo $(ulimit -S -t) $(ulimit -H -t) $(ulimit -n) $(ulimit -H -n) $(ulimit -i) "
      "$(ulimit -q) $(ulimit -l)";
  Ran ran = RunIn(work.path(), container::WithRunLimits(container::RunLimitsScript(limits, true),
                                                        {"/bin/bash", "-c", report}));
  EXPECT_EQ(ran.out, "7 8 200 200 300 4096 64\n");
  // In a session each run's wrapper sets the CPU time itself: none here.
  ran = RunIn(work.path(), container::WithRunLimits(container::RunLimitsScript(limits, false),
                                                    {"/bin/bash", "-c", "ulimit -t; ulimit -n"}));
  EXPECT_EQ(ran.out, "unlimited\n200\n");
  // The program's wrapper sets them first (not run here: its kill(-1) would reach the test's
  // own processes).
  container::ProgramExec exec;
  exec.program = {"/bin/true"};
  exec.limits = container::RunLimitsScript(limits, true);
  EXPECT_EQ(container::ProgramArgv(exec)[2].rfind(exec.limits, 0), 0u);
  EXPECT_EQ(container::WithRunLimits("", {"a", "b"}), (std::vector<std::string>{"a", "b"}));
}

TEST(InlineFiles, SmallTopLevelTextTravelsInTheArgv) {
  TempDir host;
  const std::string code = "print('h\xc3\xa9llo \xf0\x9f\x90\x8d')\n";  // UTF-8, 2 and 4 bytes
  std::vector<StagedFile> files = {{"__main__.py", host.Write("m", code)},
                                   {"empty.txt", host.Write("e", "")}};
  auto pairs = container::InlineFiles(files);
  ASSERT_TRUE(pairs.has_value());
  EXPECT_THAT(*pairs, ElementsAre("__main__.py", code, "empty.txt", ""));
  EXPECT_THAT(*container::InlineFiles({}), ElementsAreArray(std::vector<std::string>{}));
}

TEST(InlineFiles, OthersGoByTar) {
  TempDir host;
  auto one = [&](const std::string& path, const std::string& content) {
    return container::InlineFiles({{path, host.Write("f", content)}}).has_value();
  };
  EXPECT_TRUE(one("a.py", "x"));
  EXPECT_FALSE(one("dir/a.py", "x")) << "not top-level";
  EXPECT_FALSE(one("a.bin", std::string("a\0b", 3))) << "NUL";
  EXPECT_FALSE(one("a.txt", "\xff\xfe")) << "not UTF-8";
  EXPECT_FALSE(one("a.txt", "\xc0\xaf")) << "overlong form";
  EXPECT_FALSE(one("a.txt", "\xed\xa0\x80")) << "surrogate";
  EXPECT_FALSE(one("a.txt", "ok \xe2\x82")) << "cut short";
  EXPECT_TRUE(one("a.txt", std::string(64 << 10, 'a')));
  EXPECT_FALSE(one("a.txt", std::string((64 << 10) + 1, 'a'))) << "over 64 KiB";
  std::vector<StagedFile> two = {{"a", host.Write("a", std::string(40 << 10, 'a'))},
                                 {"b", host.Write("b", std::string(30 << 10, 'b'))}};
  EXPECT_FALSE(container::InlineFiles(two).has_value()) << "64 KiB together";
  EXPECT_FALSE(container::InlineFiles({{"gone", host.path() + "/no-such-file"}}).has_value());
}

// [u32 len][request][u32 len][stdin][nonce], little-endian.
TEST(CallFrame, LengthPrefixedRequestAndStdinThenTheNonce) {
  const std::string nonce(32, 'f');
  EXPECT_EQ(container::CallFrame("ab", "", nonce), std::string("\x02\0\0\0ab\0\0\0\0", 10) + nonce);
  const std::string big(300, 'r');
  EXPECT_EQ(container::CallFrame(big, "in", nonce),
            std::string("\x2c\x01\0\0", 4) + big + std::string("\x02\0\0\0in", 6) + nonce);
}

}  // namespace
}  // namespace ci::docker
