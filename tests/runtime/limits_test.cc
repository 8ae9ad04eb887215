// cgroup and rlimit enforcement, timeouts and kills, observed from the host.
#include <gmock/gmock.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <thread>

#include "sandbox_fixture.h"

namespace ci::testing_support {
namespace {

using namespace std::chrono_literals;

TEST_F(SandboxTest, MemoryHogIsOomKilled) {
  SandboxSpec spec = DefaultSpec();
  spec.limits.memory_bytes = 128u << 20;
  Execution ex = Execute(spec, Python("b = b'x' * (1 << 30)\nprint('survived')"));
  ASSERT_TRUE(ex.outcome && ex.outcome->ok()) << ex.outcome->status().message();
  if (Rootless()) {
    // No cgroup for an unprivileged user here (v1): RLIMIT_DATA refuses the allocation instead.
    ASSERT_TRUE(WithoutCgroup());
    EXPECT_EQ((*ex.outcome)->exit_code, 1);
    EXPECT_THAT(ex.err, ::testing::HasSubstr("MemoryError"));
    EXPECT_FALSE(ex.report.oom_killed);
    EXPECT_LT((*ex.outcome)->max_rss_kb, 128u << 10);  // never got near the 1 GiB it asked for
    EXPECT_EQ(ex.out, "");
    return;
  }
  EXPECT_EQ((*ex.outcome)->signal, SIGKILL);
  EXPECT_TRUE(ex.report.oom_killed);
  EXPECT_GT(ex.report.memory_peak_bytes, 100u << 20);
  EXPECT_EQ(ex.out, "");
}

TEST_F(SandboxTest, ForkLoopHitsPidsLimit) {
  SandboxSpec spec = DefaultSpec();
  spec.limits.pids = 16;
  Execution ex = Execute(spec, Python(R"PY(
import os, time
n = 0
try:
    while n < 100:
        if os.fork() == 0:
            time.sleep(30); os._exit(0)
        n += 1
except OSError as e:
    print("fork failed after", n, e.strerror)
)PY"));
  ASSERT_TRUE(ex.outcome && ex.outcome->ok()) << ex.outcome->status().message();
  EXPECT_EQ((*ex.outcome)->exit_code, 0) << ex.err;
  EXPECT_THAT(ex.out, ::testing::HasSubstr("fork failed after"));
  if (Rootless()) {
    // RLIMIT_NPROC = 16 counts this sandbox's tasks of the sandbox user (python, children; init
    // too with the one-id map): EAGAIN, no event.
    ASSERT_TRUE(WithoutCgroup());
    EXPECT_THAT(ex.out, ::testing::ContainsRegex("fork failed after 1[0-5] Resource temporarily"))
        << ex.out;
    EXPECT_FALSE(ex.report.pids_limit_hit);
    return;
  }
  EXPECT_TRUE(ex.report.pids_limit_hit);
}

// Rootless, RLIMIT_NPROC is counted per (user namespace, uid) (Linux 5.14+), not per host uid: two
// sandboxes of the same daemon user, each near its limit, do not starve each other.
TEST_F(SandboxTest, ProcessLimitIsPerSandbox) {
  // Per sandbox either way: its own pids cgroup as root, RLIMIT_NPROC counted per user namespace
  // (Linux 5.14+) in the rootless fallback.
  SandboxSpec spec = DefaultSpec();
  spec.limits.pids = 8;
  // The first sandbox runs on its own io_context and thread, holding 7 of its 8 tasks (init, sh,
  // 5 sleepers) until it is killed.
  asio::io_context io2;
  runtime::LocalExecutorOptions opts;
  opts.shim_binary = std::getenv("CI_TEST_SHIM");
  auto executor2 = runtime::MakeLocalExecutor(io2.get_executor(), opts);
  std::unique_ptr<Sandbox> first;
  std::atomic<bool> up{false};
  std::string first_error;
  asio::co_spawn(
      io2,
      [&]() -> asio::awaitable<void> {
        auto prepared = co_await executor2->Prepare(spec);
        if (!prepared.ok()) {
          first_error = prepared.status().message();
          up = true;
          co_return;
        }
        first = std::move(prepared.value());
        auto run =
            co_await first->Run(Shell("for i in 1 2 3 4 5; do sleep 30 & done; echo up; wait", 25s),
                                [&](StreamKind, std::string_view chunk) {
                                  if (chunk.find("up") != std::string_view::npos) up = true;
                                });
        co_await first->Destroy();
      },
      asio::detached);
  std::thread t([&] { io2.run(); });
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!up && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(up.load());
  EXPECT_EQ(first_error, "");
  Execution second = Execute(spec, Shell("for i in 1 2 3 4 5; do sleep 0.1 & done; wait; echo ok"));
  asio::post(io2, [&] {
    if (first) first->Kill();
  });
  t.join();
  ASSERT_TRUE(second.outcome && second.outcome->ok());
  EXPECT_EQ(second.out, "ok\n") << second.err;
}

TEST_F(SandboxTest, CpuSpinIsStoppedByRlimit) {
  SandboxSpec spec = DefaultSpec();
  spec.limits.cpu_time_sec = 1;
  Execution ex = Execute(spec, Python("while True: pass", 10s));
  ASSERT_TRUE(ex.outcome && ex.outcome->ok()) << ex.outcome->status().message();
  EXPECT_FALSE((*ex.outcome)->timed_out);
  EXPECT_THAT((*ex.outcome)->signal, ::testing::AnyOf(SIGXCPU, SIGKILL));
  // The kernel stops it by its tick-sampled CPU count, the report is the exact one: on a busy
  // machine a spinner is charged ticks others used (780 ms measured at the stop under CI's load).
  EXPECT_GE((*ex.outcome)->cpu_ms, 500u);
  EXPECT_LT(ex.run_ms, 5000);
}

TEST_F(SandboxTest, CpuCapThrottlesASpin) {
  if (Rootless() && WithoutCgroup()) {
    // No cgroup for an unprivileged user here: the cap cannot hold, and the executor says so.
    SandboxSpec spec = DefaultSpec();
    spec.limits.cpu_percent = 20;
    bool reported = false;
    for (const auto& d : executor_->enforcement(spec).downgrades) {
      reported |= d.measure == "CPU cap 20% (cgroup)";
    }
    EXPECT_TRUE(reported);
    return;
  }
  SandboxSpec spec = DefaultSpec();
  spec.limits.cpu_percent = 20;
  // Spins for one second of wall time; under a 20% cap it gets about 0.2 s of CPU.
  Execution ex = Execute(spec, Python("import time\nend = time.monotonic() + 1\n"
                                      "while time.monotonic() < end: pass",
                                      10s));
  ASSERT_TRUE(ex.outcome && ex.outcome->ok()) << ex.outcome->status().message();
  EXPECT_EQ((*ex.outcome)->exit_code, 0) << ex.err;
  EXPECT_GT((*ex.outcome)->cpu_ms, 50u);
  EXPECT_LT((*ex.outcome)->cpu_ms, 500u);
}

TEST_F(SandboxTest, TimeoutKillsTheWholeTree) {
  const std::string seconds = UniqueSleepSeconds();
  const std::string sleeper = std::string("sleep\0", 6) + seconds;
  const int before = CountHostProcesses(sleeper);
  const auto mounts_before = ListSandboxRootMounts();
  const auto cgroups_before = ListEmptyCgroups();
  auto prepared = Await(executor_->Prepare(DefaultSpec()));
  ASSERT_TRUE(prepared.ok()) << prepared.status().message();
  auto sandbox = std::move(prepared.value());
  const auto start = std::chrono::steady_clock::now();
  auto outcome = Await(sandbox->Run(
      Shell("s=" + seconds + "; sleep $s & sleep $s & (sleep $s &) ; echo started; sleep $s",
            500ms),
      [](StreamKind, std::string_view) {}));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_TRUE(outcome->timed_out);
  EXPECT_FALSE(outcome->exit_code.has_value());
  EXPECT_LT(elapsed, 1500ms);
  EXPECT_GE(outcome->duration_ms, 500u);
  EXPECT_LT(outcome->duration_ms, 1500u);          // ~20 ms after the timeout on an idle host
  EXPECT_EQ(CountHostProcesses(sleeper), before);  // already gone before Destroy
  // The sandbox survives a timeout so the workspace can still be collected.
  auto collected = Await(sandbox->Collect({"/tmp", 10, 1 << 20, "__main__.py"}));
  EXPECT_TRUE(collected.ok()) << collected.status().message();
  Await(sandbox->Destroy());
  Await(executor_->Drain());
  EXPECT_EQ(ListSandboxRootMounts(), mounts_before);
  EXPECT_EQ(CgroupsLeakedSince(cgroups_before), std::vector<std::string>{});
}

TEST_F(SandboxTest, KillDuringRunEndsItPromptly) {
  const auto cgroups_before = ListEmptyCgroups();
  auto prepared = Await(executor_->Prepare(DefaultSpec()));
  ASSERT_TRUE(prepared.ok()) << prepared.status().message();
  auto sandbox = std::move(prepared.value());
  asio::steady_timer timer(io_, 300ms);
  timer.async_wait([&](boost::system::error_code) { sandbox->Kill(); });
  const auto start = std::chrono::steady_clock::now();
  auto outcome = Await(sandbox->Run(Shell("sleep 100", 30s), [](StreamKind, std::string_view) {}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  ASSERT_FALSE(outcome.ok());
  EXPECT_THAT(outcome.status().message(), ::testing::HasSubstr("killed"));
  Await(sandbox->Destroy());
  Await(sandbox->Destroy());  // twice is fine
  // The shim removes the cgroup after its report, in the background: Drain waits for that.
  Await(executor_->Drain());
  EXPECT_EQ(CgroupsLeakedSince(cgroups_before), std::vector<std::string>{});
}

}  // namespace
}  // namespace ci::testing_support

namespace ci::testing_support {
namespace {

// A daemon that dies without Destroy(): its shim sees EOF on fd 3, kills the sandbox and removes
// the cgroup by itself.
TEST_F(SandboxTest, DaemonDeathCleansUp) {
  const auto cgroups_before = ListEmptyCgroups();
  const std::string seconds = UniqueSleepSeconds();
  const std::string marker = std::string("sleep\0", 6) + seconds;
  pid_t child = ::fork();
  if (child == 0) {
    asio::io_context io;
    runtime::LocalExecutorOptions opts;
    opts.shim_binary = std::getenv("CI_TEST_SHIM");
    auto executor = runtime::MakeLocalExecutor(io.get_executor(), opts);
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          auto sandbox = co_await executor->Prepare(DefaultSpec());
          if (!sandbox.ok()) ::_exit(2);
          auto run =
              (*sandbox)->Run(Shell("sleep " + seconds), [](StreamKind, std::string_view) {});
          co_await std::move(run);
        },
        asio::detached);
    asio::steady_timer t(io, 300ms);
    t.async_wait([](boost::system::error_code) { ::_exit(0); });  // "crash" mid-run
    io.run();
    ::_exit(3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  while (CountHostProcesses(marker) > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(CountHostProcesses(marker), 0);
  EXPECT_EQ(CgroupsLeakedSince(cgroups_before), std::vector<std::string>{});
}

}  // namespace
}  // namespace ci::testing_support
