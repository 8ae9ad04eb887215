// Session sandboxes: many runs in one sandbox, background programs that survive them, leftovers
// killed after each run, and the sandbox ending by itself at its expiry.
#include <gmock/gmock.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <thread>

#include "common/fd_handover.h"
#include "common/hard_to_kill.h"
#include "common/pending_timer.h"
#include "sandbox_fixture.h"

namespace ci::testing_support {
namespace {

using namespace std::chrono_literals;

class SessionTest : public SessionSandboxTest {
 protected:
  struct Call {
    Result<RunOutcome> outcome = Status::Error("not run");
    std::string out, err;
  };
  Call Run(RunPayload payload) {
    Call c;
    c.outcome = Await(sandbox_->Run(std::move(payload), [&](StreamKind k, std::string_view d) {
      (k == StreamKind::kStdout ? c.out : c.err).append(d);
    }));
    return c;
  }
};

TEST_F(SessionTest, WorkspaceAndTmpPersistButProcessesDoNot) {
  Call first = Run(Shell("echo one > /workspace/a; echo two > /tmp/b; sleep 300 & echo started"));
  ASSERT_TRUE(first.outcome.ok()) << first.outcome.status().message();
  EXPECT_EQ(first.outcome->exit_code, 0);
  EXPECT_EQ(first.out, "started\n");
  // Stdin of a later run is fresh too.
  // The sleeps among the sandbox's processes (counting all of them raced a pipeline's own
  // processes, which bash starts one after the other).
  RunPayload second =
      Shell("cat /workspace/a /tmp/b; cat; cat /proc/[0-9]*/comm 2>/dev/null | grep -c '^sleep$'");
  second.stdin_data = "input\n";
  Call c = Run(std::move(second));
  ASSERT_TRUE(c.outcome.ok()) << c.outcome.status().message();
  // The sleep of the first run is gone.
  EXPECT_EQ(c.out, "one\ntwo\ninput\n0\n");
}

// Issue 30 item 1: what a run leaves is killed whatever its name or its state (a thread-group
// leader that ended while its thread runs shows Z). With a background program the kill goes
// process by process (sparing its session) instead of kill(-1).
TEST_F(SessionTest, WhatARunLeavesIsKilledWhateverItsNameOrState) {
  RunPayload bg = Shell("exec sleep 300");
  bg.background = true;
  ASSERT_TRUE(Run(std::move(bg)).outcome.ok());
  Call c = Run(Python(kHardToKill));
  ASSERT_TRUE(c.outcome.ok()) << c.outcome.status().message();
  ASSERT_EQ(c.outcome->exit_code, 0) << c.err;
  c = Run(Python(kHardToKillLeft));
  ASSERT_TRUE(c.outcome.ok()) << c.outcome.status().message();
  EXPECT_EQ(c.out, "0\n") << c.err;
}

TEST_F(SessionTest, BackgroundProgramSurvivesRunsAndTimeouts) {
  RunPayload bg = Shell("echo $$ > /tmp/bg.pid; exec sleep 300");
  bg.background = true;
  Call started = Run(std::move(bg));
  ASSERT_TRUE(started.outcome.ok()) << started.outcome.status().message();
  EXPECT_FALSE(started.outcome->exit_code.has_value());
  EXPECT_FALSE(started.outcome->timed_out);

  Call timed_out = Run(Shell("sleep 30 & sleep 30", 300ms));
  ASSERT_TRUE(timed_out.outcome.ok()) << timed_out.outcome.status().message();
  EXPECT_TRUE(timed_out.outcome->timed_out);

  Call check = Run(Shell(
      "for i in 1 2 3 4 5 6 7 8 9 10; do [ -s /tmp/bg.pid ] && break; sleep 0.1; done;"
      "kill -0 $(cat /tmp/bg.pid) && echo alive; ps -eo comm= 2>/dev/null | sort | tr '\\n' ' '"));
  ASSERT_TRUE(check.outcome.ok()) << check.outcome.status().message();
  EXPECT_THAT(check.out, ::testing::StartsWith("alive\n"));

  Call count = Run(Shell("grep -l sleep /proc/[0-9]*/comm 2>/dev/null | wc -l"));
  ASSERT_TRUE(count.outcome.ok());
  EXPECT_EQ(count.out, "1\n") << "only the background sleep is left";
}

TEST_F(SessionTest, BackgroundChildHoldingAPipeDoesNotHoldTheRun) {
  // A background program's child that inherited a run's stdout (as a persistent interpreter's
  // subprocess would): the run ends at its exit report, not when that child closes the pipe.
  // The background program takes a run's stdout over a unix socket and starts a long sleep on it.
  RunPayload bg = Python(testing_support::kFdKeeperProgram);
  bg.background = true;
  ASSERT_TRUE(Run(std::move(bg)).outcome.ok());
  auto t0 = std::chrono::steady_clock::now();
  Call c = Run(Python(testing_support::kFdHandOverProgram));
  ASSERT_TRUE(c.outcome.ok()) << c.outcome.status().message();
  EXPECT_EQ(c.out, "handed over\n") << c.err;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST_F(SessionTest, ManyRunsInOneSandbox) {
  for (int i = 0; i < 20; ++i) {
    Call c = Run(Shell("echo -n x >> /workspace/count; wc -c < /workspace/count"));
    ASSERT_TRUE(c.outcome.ok()) << i << ": " << c.outcome.status().message();
    EXPECT_EQ(c.out, std::to_string(i + 1) + "\n");
  }
  CollectLimits limits;
  char dir[] = "/tmp/ci-session-collect-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  limits.dest_dir = dir;
  auto collected = Await(sandbox_->Collect(limits));
  ASSERT_TRUE(collected.ok()) << collected.status().message();
  ASSERT_EQ(collected->files.size(), 1u);
  EXPECT_EQ(collected->files[0].size, 20u);
  for (const auto& f : collected->files) unlink(f.host_path.c_str());
  rmdir(dir);
  // Runs still work after a collect.
  EXPECT_EQ(Run(Shell("echo after")).out, "after\n");
}

// A program serving calls as init's protocol wants it (session_calls.h): fd 3 is its socket;
// each call is [u32 length][request] with the call's stdio attached, answered [i32 7][u8 0].
// "spin" spins in the call, "thread" leaves a spinning thread behind and answers.
constexpr const char* kCallServer = R"PY(import os, socket, threading
s = socket.socket(fileno=3)
def spin():
    while True:
        pass
while True:
    head, fds, _, _ = socket.recv_fds(s, 4, 3)
    if not head:
        break
    while len(head) < 4:
        head += s.recv(4 - len(head))
    n = int.from_bytes(head, 'little')
    body = b''
    while len(body) < n:
        body += s.recv(n - len(body))
    os.write(fds[1], b'got ' + body + b'\n')
    for fd in fds:
        os.close(fd)
    if body == b'spin':
        spin()
    if body == b'thread':
        threading.Thread(target=spin, daemon=True).start()
    s.sendall((7).to_bytes(4, 'little') + b'\0')
)PY";

class CallServerTest : public SandboxTest {
 protected:
  void Start(uint32_t cpu_time_sec) {
    SandboxSpec spec = DefaultSpec();
    spec.session_expires_at = static_cast<int64_t>(std::time(nullptr)) + 600;
    spec.limits.cpu_time_sec = cpu_time_sec;
    auto prepared = Await(executor_->Prepare(spec));
    ASSERT_TRUE(prepared.ok()) << prepared.status().message();
    sandbox_ = std::move(prepared.value());
    RunPayload server = Python(kCallServer);
    server.background = true;
    server.serves_calls = true;
    auto started = Await(sandbox_->Run(std::move(server), [](StreamKind, std::string_view) {}));
    ASSERT_TRUE(started.ok()) << started.status().message();
  }
  void TearDown() override {
    if (sandbox_) Await(sandbox_->Destroy());
    SandboxTest::TearDown();
  }
  struct Outcome {
    Result<RunOutcome> run = Status::Error("not run");
    std::string out;
  };
  Outcome Call(const std::string& request, std::chrono::milliseconds timeout = 20s) {
    RunPayload p;
    p.call = request;
    p.timeout = timeout;
    Outcome o;
    o.run = Await(sandbox_->Run(std::move(p), [&](StreamKind k, std::string_view d) {
      if (k == StreamKind::kStdout) o.out.append(d);
    }));
    return o;
  }
  std::unique_ptr<Sandbox> sandbox_;
};

TEST_F(CallServerTest, CallsGoOverInitsSocketAndNothingHasAName) {
  Start(5);
  Outcome c = Call("hello");
  ASSERT_TRUE(c.run.ok()) << c.run.status().message();
  EXPECT_EQ(c.out, "got hello\n");
  EXPECT_EQ(c.run->exit_code, 7);
  EXPECT_FALSE(c.run->no_server);
  // No unix socket of the sandbox has a name (abstract or path) another process could connect
  // to; the server is reachable through init only.
  RunPayload look = Shell("awk 'NR > 1 && NF >= 8' /proc/net/unix | wc -l");
  std::string out;
  auto looked = Await(sandbox_->Run(std::move(look), [&](StreamKind k, std::string_view d) {
    if (k == StreamKind::kStdout) out.append(d);
  }));
  ASSERT_TRUE(looked.ok());
  EXPECT_EQ(out, "0\n");
  EXPECT_EQ(Call("again").out, "got again\n") << "the server outlives the bash run";
  // Once the server is gone, a call says so instead of running anything.
  ASSERT_TRUE(Await(sandbox_->Run(Shell("kill -9 -1"), [](StreamKind, std::string_view) {})).ok());
  Outcome gone = Call("hello");
  ASSERT_TRUE(gone.run.ok()) << gone.run.status().message();
  // SIGKILL is asynchronous: the server may still be dying when the call is sent.
  EXPECT_TRUE(gone.run->no_server || gone.run->signal == SIGKILL);
  EXPECT_TRUE(Call("hello").run->no_server);
}

TEST_F(CallServerTest, CallPastItsTimeoutKillsTheServer) {
  Start(60);
  Outcome c = Call("spin", 300ms);
  ASSERT_TRUE(c.run.ok()) << c.run.status().message();
  EXPECT_TRUE(c.run->timed_out);
  EXPECT_TRUE(Call("hello").run->no_server);
}

TEST_F(CallServerTest, CallPastTheCpuLimitKillsTheServer) {
  Start(1);
  Outcome c = Call("spin");
  ASSERT_TRUE(c.run.ok()) << c.run.status().message();
  EXPECT_FALSE(c.run->timed_out);
  EXPECT_EQ(c.run->signal, SIGKILL);
  EXPECT_GE(c.run->cpu_ms, 1000u);
  EXPECT_TRUE(Call("hello").run->no_server);
}

TEST_F(CallServerTest, ThreadSpinningBetweenCallsKillsTheServer) {
  Start(1);
  Outcome c = Call("thread");
  ASSERT_TRUE(c.run.ok()) << c.run.status().message();
  EXPECT_EQ(c.run->exit_code, 7);
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {  // calls between the idle stretches do not reset it
    std::this_thread::sleep_for(100ms);
    Outcome again = Call("hello");
    ASSERT_TRUE(again.run.ok()) << again.run.status().message();
    gone = again.run->no_server || again.run->signal == SIGKILL;
  }
  EXPECT_TRUE(gone);
}

// Issue 34 item 1: Freeze stops every process of the sandbox where it stands. Watched from the
// host (the sandbox's own runs are refused while it is frozen): through /proc/<pid>/root of a
// process of the sandbox, found by a marker in its command line.
class FreezeTest : public SessionTest {
 protected:
  // The host pid of the process whose command line holds `marker`; 0 when none.
  static pid_t HostPidOf(const std::string& marker) {
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      const std::string name = e.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string cmdline = ReadFileOrEmpty(e.path() / "cmdline");
      std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
      if (cmdline.find(marker) != std::string::npos) return std::stoi(name);
    }
    return 0;
  }
  // A file of the sandbox's workspace as `pid` sees it; "" when missing.
  static std::string WorkspaceFile(pid_t pid, const std::string& name) {
    return ReadFileOrEmpty("/proc/" + std::to_string(pid) + "/root/workspace/" + name);
  }
  // Starts a process writing 1, 2, 3, ... into /workspace/count every 10 ms; its host pid.
  pid_t StartCounter(const std::string& marker) {
    ProcessSpec spec;
    spec.argv = {"/bin/sh", "-c",
                 "i=0; while :; do i=$((i+1)); echo $i > /workspace/count.tmp; "
                 "mv /workspace/count.tmp /workspace/count; sleep 0.01; done",
                 marker};
    spec.env = DefaultSandboxEnv();
    spec.cwd = "/workspace";
    auto started = Await(sandbox_->Spawn(std::move(spec)));
    EXPECT_TRUE(started.ok()) << started.status().message();
    if (!started.ok()) return 0;
    counter_ = std::move(started.value());
    for (int i = 0; i < 500; ++i) {
      pid_t pid = HostPidOf(marker);
      if (pid > 0 && !WorkspaceFile(pid, "count").empty()) return pid;
      std::this_thread::sleep_for(10ms);
    }
    ADD_FAILURE() << "the counter did not start";
    return 0;
  }
  // Waits (10 s at most) until `pid` sees /workspace/count past `past`.
  static bool CountAdvances(pid_t pid, const std::string& past) {
    for (int i = 0; i < 1000; ++i) {
      std::string now = WorkspaceFile(pid, "count");
      if (!now.empty() && now != past) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  // Freeze(frozen), asserting it worked; its milliseconds.
  double Timed(bool frozen) {
    const auto t0 = std::chrono::steady_clock::now();
    Status s = Await(sandbox_->Freeze(frozen));
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - t0;
    EXPECT_TRUE(s.ok()) << s.message();
    return took.count();
  }
  // Without a cgroup of its own (rootless here) Freeze is unavailable, and says why.
  bool FreezeUnavailable() {
    if (!WithoutCgroup()) return false;
    for (bool frozen : {true, false}) {
      Status s = Await(sandbox_->Freeze(frozen));
      EXPECT_TRUE(s.unavailable()) << s.message();
      EXPECT_EQ(s.unavailable_reason(), "freeze");
      EXPECT_THAT(s.message(), ::testing::HasSubstr("no cgroup of its own"));
    }
    return true;
  }
  std::unique_ptr<SandboxProcess> counter_;
};

TEST_F(FreezeTest, NothingRunsWhileFrozenAndEverythingGoesOnAfterTheThaw) {
  if (FreezeUnavailable()) return;
  const std::string marker = "ci-counter-" + UniqueSleepSeconds();
  const pid_t pid = StartCounter(marker);
  ASSERT_GT(pid, 0);
  auto start = [this](const std::string& command) {
    RunPayload timer = Shell(command);
    timer.background = true;
    return Run(std::move(timer)).outcome.ok();
  };
  auto freeze = [this] { std::cout << "freeze: " << Timed(true) << " ms\n"; };
  auto timer = testing_support::FreezeWithPendingTimer(start, freeze, [this] { Timed(false); });
  ASSERT_TRUE(timer) << "no timer was still pending when the freeze completed";
  const std::string fired = timer->name;

  // Frozen: the count stands still, the timer does not fire, and calls to init are refused.
  const std::string frozen_at = WorkspaceFile(pid, "count");
  std::this_thread::sleep_for(timer->FrozenLongEnough());
  EXPECT_EQ(WorkspaceFile(pid, "count"), frozen_at) << "the counter ran while frozen";
  EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(pid) + "/root/workspace/" + fired))
      << "the timer fired while frozen";
  Call refused = Run(Shell("true"));
  ASSERT_FALSE(refused.outcome.ok());
  EXPECT_THAT(refused.outcome.status().message(), ::testing::HasSubstr("frozen"));
  EXPECT_FALSE(Await(sandbox_->Collect(CollectLimits{})).ok());

  std::cout << "thaw: " << Timed(false) << " ms\n";
  EXPECT_TRUE(CountAdvances(pid, frozen_at)) << "the counter did not go on after the thaw";
  Call after = Run(Shell("for i in $(seq 100); do [ -e /workspace/" + fired +
                         " ] && break; sleep 0.1; done; ls /workspace/" + fired));
  ASSERT_TRUE(after.outcome.ok()) << after.outcome.status().message();
  EXPECT_EQ(after.out, "/workspace/" + fired + "\n") << after.err;
}

TEST_F(FreezeTest, FreezingTwiceAndThawingWhatRunsAreHarmless) {
  if (FreezeUnavailable()) return;
  const pid_t pid = StartCounter("ci-counter-" + UniqueSleepSeconds());
  ASSERT_GT(pid, 0);
  Timed(false);  // never frozen
  Timed(true);
  Timed(true);
  const std::string frozen_at = WorkspaceFile(pid, "count");
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(WorkspaceFile(pid, "count"), frozen_at);
  Timed(false);
  Timed(false);
  EXPECT_TRUE(CountAdvances(pid, frozen_at));
  Call c = Run(Shell("echo ok"));
  ASSERT_TRUE(c.outcome.ok()) << c.outcome.status().message();
  EXPECT_EQ(c.out, "ok\n");
}

// Shells that start commands without end (dash starts them with vfork): a cgroup v1 freeze tries
// each task once per write, so a parent that went into its vfork wait just after its try held the
// cgroup FREEZING for ever (half of the freezes here) until Freeze asked again while it waited.
TEST_F(FreezeTest, ProcessesThatStartProcessesWithoutEndAreFrozenEveryTime) {
  if (FreezeUnavailable()) return;
  const pid_t pid = StartCounter("ci-counter-" + UniqueSleepSeconds());
  ASSERT_GT(pid, 0);
  for (int i = 0; i < 3; ++i) {
    RunPayload spawner = Shell("while :; do /bin/true; done");
    spawner.background = true;
    ASSERT_TRUE(Run(std::move(spawner)).outcome.ok());
  }
  for (int i = 0; i < 20; ++i) {
    SCOPED_TRACE("freeze " + std::to_string(i));
    ASSERT_TRUE(Await(sandbox_->Freeze(true)).ok());
    const std::string frozen_at = WorkspaceFile(pid, "count");
    std::this_thread::sleep_for(30ms);
    EXPECT_EQ(WorkspaceFile(pid, "count"), frozen_at) << "the counter ran while frozen";
    ASSERT_TRUE(Await(sandbox_->Freeze(false)).ok());
  }
}

// Destroy (and Kill first) of a frozen sandbox: init cannot answer, its parent kills it and
// thaws the cgroup (cgroup v1 holds a frozen task's SIGKILL until then).
TEST_F(FreezeTest, DestroyAndKillOfAFrozenSandboxLeaveNothing) {
  if (FreezeUnavailable()) return;
  for (bool kill_first : {false, true}) {
    SCOPED_TRACE(kill_first ? "Kill, then Destroy" : "Destroy");
    if (kill_first) {
      SandboxSpec spec = DefaultSpec();
      spec.session_expires_at = static_cast<int64_t>(std::time(nullptr)) + 600;
      auto prepared = Await(executor_->Prepare(spec));
      ASSERT_TRUE(prepared.ok()) << prepared.status().message();
      sandbox_ = std::move(prepared.value());
    }
    const std::vector<std::string> before = ListEmptyCgroups();
    const std::string marker = "ci-counter-" + UniqueSleepSeconds();
    const pid_t pid = StartCounter(marker);
    ASSERT_GT(pid, 0);
    const std::string cgroups = ReadFileOrEmpty("/proc/" + std::to_string(pid) + "/cgroup");
    Timed(true);
    const std::string frozen_at = WorkspaceFile(pid, "count");
    std::this_thread::sleep_for(200ms);
    ASSERT_EQ(WorkspaceFile(pid, "count"), frozen_at) << "not frozen";
    const auto t0 = std::chrono::steady_clock::now();
    if (kill_first) sandbox_->Kill();
    Await(sandbox_->Destroy());
    // Without the kill and thaw, the teardown's 5 s guard would kill the parent and leave the
    // sandbox frozen.
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s);
    Await(executor_->Drain());
    sandbox_.reset();
    EXPECT_EQ(HostPidOf(marker), 0) << "a process of the sandbox is left";
    EXPECT_THAT(CgroupsLeakedSince(before), ::testing::IsEmpty());
    // Every hierarchy's directory of the sandbox is gone (frozen tasks would hold them).
    std::string name;
    std::istringstream lines(cgroups);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("/code-interpreter/") != std::string::npos) name = line.substr(line.rfind('/'));
    }
    ASSERT_THAT(name, ::testing::Not(::testing::IsEmpty())) << cgroups;
    for (const char* h : {"memory", "pids", "cpuacct", "freezer"}) {
      const std::string dir = std::string("/sys/fs/cgroup/") + h + "/code-interpreter" + name;
      EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
    }
  }
}

TEST_F(SandboxTest, SessionSandboxEndsByItselfAtExpiry) {
  SandboxSpec spec = DefaultSpec();
  spec.session_expires_at = static_cast<int64_t>(std::time(nullptr)) + 2;
  auto prepared = Await(executor_->Prepare(spec));
  ASSERT_TRUE(prepared.ok()) << prepared.status().message();
  auto sandbox = std::move(prepared.value());
  std::this_thread::sleep_for(3500ms);
  auto outcome = Await(sandbox->Run(Shell("echo still here"), [](StreamKind, std::string_view) {}));
  EXPECT_FALSE(outcome.ok());
  Await(sandbox->Destroy());
}

TEST_F(SandboxTest, ExecutionSandboxRefusesSecondRunAndBackground) {
  auto prepared = Await(executor_->Prepare(DefaultSpec()));
  ASSERT_TRUE(prepared.ok());
  auto sandbox = std::move(prepared.value());
  RunPayload bg = Shell("true");
  bg.background = true;
  EXPECT_FALSE(Await(sandbox->Run(std::move(bg), [](StreamKind, std::string_view) {})).ok());
  EXPECT_TRUE(Await(sandbox->Run(Shell("true"), [](StreamKind, std::string_view) {})).ok());
  EXPECT_FALSE(Await(sandbox->Run(Shell("true"), [](StreamKind, std::string_view) {})).ok());
  Await(sandbox->Destroy());
}

}  // namespace
}  // namespace ci::testing_support
