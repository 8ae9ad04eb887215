// Processes of a session sandbox (core/executor.h ProcessSpec): started between runs with their
// own pipes, fed stdin, signalled by pid, told ended by init's status pipe, and spared by the
// runs' kills.
#include <gmock/gmock.h>

#include <csignal>
#include <ctime>

#include "sandbox_fixture.h"

namespace ci::testing_support {
namespace {

using namespace std::chrono_literals;

class ProcessTest : public SessionSandboxTest {
 protected:
  std::unique_ptr<SandboxProcess> Spawn(const std::string& script, bool stdin = false,
                                        std::string cwd = "/home/user") {
    ProcessSpec spec;
    spec.argv = {"/bin/sh", "-c", script};
    spec.env = DefaultSandboxEnv();
    spec.cwd = std::move(cwd);
    spec.stdin = stdin;
    auto started = Await(sandbox_->Spawn(std::move(spec)));
    EXPECT_TRUE(started.ok()) << started.status().message();
    return started.ok() ? std::move(started.value()) : nullptr;
  }

  struct Ended {
    ProcessEnd end;
    std::string out, err;
  };
  Ended Wait(SandboxProcess& p) {
    Ended e;
    e.end = Await(p.Wait([&](StreamKind k, std::string d) -> asio::awaitable<void> {
      (k == StreamKind::kStdout ? e.out : e.err).append(d);
      co_return;
    }));
    return e;
  }

  std::string RunShell(const std::string& script) {
    std::string out;
    auto r =
        Await(sandbox_->Run(Shell(script), [&](StreamKind, std::string_view d) { out.append(d); }));
    EXPECT_TRUE(r.ok()) << r.status().message();
    return out;
  }
};

TEST_F(ProcessTest, StdinOutputAndExitCode) {
  auto p = Spawn("read x; echo got:$x; echo e >&2; pwd; exit 7", /*stdin=*/true);
  ASSERT_NE(p, nullptr);
  EXPECT_GT(p->pid(), 1u);
  ASSERT_TRUE(Await(p->WriteStdin("hi\n")).ok());
  Ended e = Wait(*p);
  EXPECT_EQ(e.end.exit_code, 7);
  EXPECT_EQ(e.end.signal, std::nullopt);
  EXPECT_EQ(e.out, "got:hi\n/home/user\n");
  EXPECT_EQ(e.err, "e\n");
}

TEST_F(ProcessTest, WithoutStdinItReadsEndOfFile) {
  auto p = Spawn("cat; echo done");
  ASSERT_NE(p, nullptr);
  Ended e = Wait(*p);
  EXPECT_EQ(e.end.exit_code, 0);
  EXPECT_EQ(e.out, "done\n");
  EXPECT_FALSE(Await(p->WriteStdin("x")).ok());
}

// Init reaps it while it waits for the daemon: the end comes with no other request.
TEST_F(ProcessTest, ItsEndIsToldWhileTheSandboxIsIdle) {
  auto p = Spawn("sleep 0.2; exit 3");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(Wait(*p).end.exit_code, 3);
}

TEST_F(ProcessTest, RunsAndTheirKillsSpareItAndSignalsEndIt) {
  auto p = Spawn("exec sleep 300");
  ASSERT_NE(p, nullptr);
  const std::string pid = std::to_string(p->pid());
  // A run that leaves a process behind: the kill after it spares the spawned one.
  EXPECT_EQ(RunShell("sleep 300 & echo left"), "left\n");
  EXPECT_EQ(RunShell("kill -0 " + pid + " && echo alive"), "alive\n");
  ASSERT_TRUE(Await(sandbox_->Signal(p->pid(), SIGTERM)).ok());
  Ended e = Wait(*p);
  EXPECT_EQ(e.end.signal, SIGTERM);
  EXPECT_EQ(e.end.exit_code, std::nullopt);
  // Ended and reaped: signalling it again is no error; a pid never started is one.
  EXPECT_TRUE(Await(sandbox_->Signal(p->pid(), SIGKILL)).ok());
  EXPECT_FALSE(Await(sandbox_->Signal(1, SIGKILL)).ok());
}

// The signal goes to its process group: what it started ends with it.
TEST_F(ProcessTest, ASignalReachesWhatItStarted) {
  auto p = Spawn("sleep 300 & echo $! > /tmp/child.tmp; mv /tmp/child.tmp /tmp/child; wait");
  ASSERT_NE(p, nullptr);
  const std::string child =
      RunShell("until [ -s /tmp/child ]; do sleep 0.01; done; tr -d '\\n' < /tmp/child");
  ASSERT_FALSE(child.empty());
  EXPECT_EQ(RunShell("kill -0 " + child + " && echo alive"), "alive\n");
  ASSERT_TRUE(Await(sandbox_->Signal(p->pid(), SIGKILL)).ok());
  EXPECT_EQ(Wait(*p).end.signal, SIGKILL);
  // Dead: gone, or a zombie init has not reaped yet (the kill is asynchronous; 2 s at most).
  EXPECT_EQ(RunShell("for i in $(seq 200); do grep -qs '^State:[[:space:]]*[RSDT]' /proc/" + child +
                     "/status || { echo gone; exit; }; sleep 0.01; done"),
            "gone\n");
}

TEST_F(ProcessTest, AMissingDirectoryIsRefusedAndTheSandboxServesOn) {
  ProcessSpec spec;
  spec.argv = {"/bin/true"};
  spec.env = DefaultSandboxEnv();
  spec.cwd = "/no/such/dir";
  auto refused = Await(sandbox_->Spawn(std::move(spec)));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("/no/such/dir"));
  auto p = Spawn("echo ok", false, "/tmp");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(Wait(*p).out, "ok\n");
  EXPECT_EQ(RunShell("echo run"), "run\n");
}

// A start larger than a frame to init may carry is refused in the daemon: init, which would
// take such a frame for a hostile peer's and exit, never sees it.
TEST_F(ProcessTest, AStartTooLargeForInitIsRefusedAndTheSandboxServesOn) {
  ProcessSpec spec;
  spec.argv = {"/bin/true"};
  spec.env = DefaultSandboxEnv();
  for (int i = 0; i < 20; ++i)
    spec.env.push_back("X" + std::to_string(i) + "=" + std::string(100000, 'x'));
  spec.cwd = "/tmp";
  auto refused = Await(sandbox_->Spawn(std::move(spec)));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("MiB"));
  auto p = Spawn("echo ok");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(Wait(*p).out, "ok\n");
  EXPECT_EQ(RunShell("echo run"), "run\n");
}

TEST_F(ProcessTest, ManyAtOnceEachWithItsOwnOutput) {
  std::vector<std::unique_ptr<SandboxProcess>> ps;
  for (int i = 0; i < 8; ++i) ps.push_back(Spawn("sleep 0.1; echo " + std::to_string(i)));
  for (int i = 0; i < 8; ++i) {
    ASSERT_NE(ps[i], nullptr);
    Ended e = Wait(*ps[i]);
    EXPECT_EQ(e.out, std::to_string(i) + "\n");
    EXPECT_EQ(e.end.exit_code, 0);
  }
}

// Past the sandbox's pids limit a start is refused as such (the caller's 429, not its 400): the
// fork fails (a pids cgroup), or, where the limit is RLIMIT_NPROC (rootless), the kernel refuses
// the exec after the user switch and the process ends at once with 127 and EAGAIN's message.
// Once some end, the next starts.
TEST_F(ProcessTest, ThePidsLimitRefusesAStartByName) {
  std::vector<std::unique_ptr<SandboxProcess>> started;
  Status refused;
  for (int i = 0; i < 128 && refused.ok(); ++i) {
    ProcessSpec spec;
    spec.argv = {"/bin/sleep", "60"};
    spec.env = DefaultSandboxEnv();
    spec.cwd = "/tmp";
    auto p = Await(sandbox_->Spawn(std::move(spec)));
    if (p.ok()) started.push_back(std::move(p.value()));
    if (!p.ok()) refused = p.status();
  }
  for (auto& p : started) ASSERT_TRUE(Await(sandbox_->Signal(p->pid(), SIGKILL)).ok());
  int exec_refused = 0;
  for (auto& p : started) {
    Ended e = Wait(*p);
    if (e.end.exit_code == 127 &&
        e.err.find("Resource temporarily unavailable") != std::string::npos) {
      ++exec_refused;
    } else {
      EXPECT_EQ(e.end.signal, SIGKILL) << e.err;
    }
  }
  if (refused.ok()) {
    EXPECT_GT(exec_refused, 0) << started.size() << " processes started, none refused";
  } else {
    EXPECT_TRUE(refused.unavailable()) << refused.message();
    EXPECT_THAT(refused.message(), ::testing::HasSubstr("process limit"));
  }
  auto p = Spawn("echo again");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(Wait(*p).out, "again\n");
}

TEST_F(SandboxTest, AnExecutionSandboxStartsNoProcess) {
  auto prepared = Await(executor_->Prepare(DefaultSpec()));
  ASSERT_TRUE(prepared.ok()) << prepared.status().message();
  ProcessSpec spec;
  spec.argv = {"/bin/true"};
  spec.cwd = "/workspace";
  auto refused = Await((*prepared)->Spawn(std::move(spec)));
  EXPECT_FALSE(refused.ok());
  Await((*prepared)->Destroy());
}

}  // namespace
}  // namespace ci::testing_support
