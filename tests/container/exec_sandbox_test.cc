// The exec-driven sandbox (src/container/exec_sandbox.h) over a container without an engine
// (tests/common/fake_container.h): the run's wrapper, staging, stdin, the kill of leftovers, the
// timeout, sessions' background programs, Collect and Destroy, with real programs and neither a
// dockerd nor a cluster. Skips without root or bwrap.
#include "container/exec_sandbox.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "common/await.h"
#include "common/fake_container.h"
#include "container/container_exec.h"

namespace ci::container {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing_support::AwaitOn;
using testing_support::FakeContainer;

struct Ran {
  RunOutcome outcome;
  std::string out, err;
};

class ExecSandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto started = FakeContainer::Start();
    if (!started.ok()) GTEST_SKIP() << started.status().message();
    fake_ = *started;
    dir_ = fs::temp_directory_path() / ("exec-sandbox-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "out");
  }
  void TearDown() override {
    sandbox_.reset();
    fake_.reset();
    fs::remove_all(dir_);
  }

  void Make(bool session) {
    Container c;
    c.api = fake_;
    c.ex = io_.get_executor();
    c.id = "fake-container";
    c.cwd = "/workspace";
    c.session = session;
    c.cpu_time_sec = 5;
    sandbox_ = MakeExecSandbox(std::move(c), /*host_cgroups=*/false);
  }

  Ran Run(RunPayload p) {
    Ran r;
    auto sink = [&r](StreamKind kind, std::string_view data) {
      (kind == StreamKind::kStdout ? r.out : r.err).append(data);
    };
    Result<RunOutcome> outcome = AwaitOn(io_, sandbox_->Run(std::move(p), sink));
    EXPECT_TRUE(outcome.ok()) << outcome.status().message();
    if (outcome.ok()) r.outcome = *outcome;
    return r;
  }

  // The processes of the container but its PID 1 and this exec's own, by name.
  std::vector<std::string> Processes() {
    Container c;
    c.api = fake_;
    c.ex = io_.get_executor();
    auto captured =
        AwaitOn(io_, CaptureExec(c, {"bash", "-c",
                                     "for d in /proc/[0-9]*; do p=${d#/proc/}; [ $p = 1 ] || "
                                     "[ $p = $$ ] || { read -r n < $d/comm && echo $n; }; done"}));
    EXPECT_TRUE(captured.ok());
    std::vector<std::string> names;
    std::string all = captured.ok() ? captured->output : "";
    for (size_t at = 0; at < all.size();) {
      size_t nl = all.find('\n', at);
      if (nl == std::string::npos) nl = all.size();
      std::string name = all.substr(at, nl - at);
      if (!name.empty() && name != "setsid" && name != "nsenter") names.push_back(name);
      at = nl + 1;
    }
    return names;
  }

  boost::asio::io_context io_;
  std::shared_ptr<FakeContainer> fake_;
  std::unique_ptr<Sandbox> sandbox_;
  fs::path dir_;
};

TEST_F(ExecSandboxTest, AProgramGetsItsFilesAndStdinAndItsOutputsAreCollected) {
  Make(/*session=*/false);
  const fs::path input = dir_ / "in.txt";
  std::ofstream(input) << "21";
  RunPayload p;
  p.argv = {"python3", "-c",
            "import sys\n"
            "n = int(open('data/in.txt').read())\n"
            "print(n * 2)\n"
            "print(sys.stdin.read().upper(), file=sys.stderr, end='')\n"
            "open('made.txt', 'w').write('made')\n"
            "sys.exit(3)"};
  p.files = {{"data/in.txt", input.string(), nullptr}};
  p.stdin_data = "hi\n";
  p.timeout = 10s;
  Ran r = Run(std::move(p));
  EXPECT_EQ(r.outcome.exit_code, 3);
  EXPECT_FALSE(r.outcome.timed_out);
  EXPECT_EQ(r.out, "42\n");
  EXPECT_EQ(r.err, "HI\n");

  CollectLimits limits;
  limits.dest_dir = (dir_ / "out").string();
  Result<Collection> collected = AwaitOn(io_, sandbox_->Collect(limits));
  ASSERT_TRUE(collected.ok()) << collected.status().message();
  std::map<std::string, std::string> files;
  for (const CollectedFile& f : collected->files) {
    std::ifstream in(f.host_path);
    files[f.workspace_path] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  EXPECT_EQ(files["made.txt"], "made");
  EXPECT_EQ(files["data/in.txt"], "21");
  EXPECT_FALSE(collected->truncated);

  AwaitOn(io_, sandbox_->Destroy());
  EXPECT_EQ(fake_->removals(), 1);
}

TEST_F(ExecSandboxTest, WhatAProgramLeavesBehindIsKilledWhenItEnds) {
  Make(/*session=*/false);
  RunPayload p;
  p.argv = {"bash", "-c", "sleep 300 & sleep 301 & echo started"};
  p.timeout = 20s;
  const auto start = std::chrono::steady_clock::now();
  Ran r = Run(std::move(p));
  EXPECT_EQ(r.outcome.exit_code, 0);
  EXPECT_EQ(r.out, "started\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s) << "a leftover held the run";
  EXPECT_THAT(Processes(), IsEmpty()) << "only PID 1 may be left";
}

TEST_F(ExecSandboxTest, AProgramPastItsTimeoutIsKilledAndSaysSo) {
  Make(/*session=*/false);
  RunPayload p;
  p.argv = {"bash", "-c", "echo before; exec sleep 60"};
  p.timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  Ran r = Run(std::move(p));
  EXPECT_TRUE(r.outcome.timed_out);
  EXPECT_FALSE(r.outcome.exit_code.has_value());
  EXPECT_EQ(r.out, "before\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
  EXPECT_THAT(Processes(), IsEmpty());
}

TEST_F(ExecSandboxTest, ASessionsBackgroundProgramOutlivesRunsAndTheirLeftoversDoNot) {
  Make(/*session=*/true);
  RunPayload bg;
  bg.argv = {"python3", "-c", "import time; time.sleep(300)"};
  bg.background = true;
  bg.timeout = 10s;
  Ran started = Run(std::move(bg));
  EXPECT_FALSE(started.outcome.timed_out);
  RunPayload leftover;
  leftover.argv = {"bash", "-c", "sleep 302 & echo ok > kept.txt"};
  leftover.timeout = 10s;
  Ran r = Run(std::move(leftover));
  EXPECT_EQ(r.outcome.exit_code, 0);
  EXPECT_EQ(r.err, "") << "the wrapper's own words reached the program's stderr";
  EXPECT_THAT(Processes(), ElementsAre("python3"))
      << "the background program stays, the run's leftover goes";
  RunPayload read;
  read.argv = {"cat", "kept.txt"};
  read.timeout = 10s;
  EXPECT_EQ(Run(std::move(read)).out, "ok\n") << "the workspace persists between runs";
}

}  // namespace
}  // namespace ci::container
