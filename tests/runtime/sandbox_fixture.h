// Runs real sandboxes through MakeLocalExecutor with the test-shim binary (CI_TEST_SHIM).
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/await.h"
#include "runtime/daemon/local_executor.h"

namespace ci::testing_support {

struct Execution {
  std::optional<Result<RunOutcome>> outcome;
  std::string out;
  std::string err;
  std::optional<Result<Collection>> collection;
  ResourceReport report;
  // Milliseconds from Run's start to the first output chunk and to Run's completion.
  int64_t first_chunk_ms = -1;
  int64_t run_ms = -1;
  std::string cgroup_dirs_before;  // for leak checks
};

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override;
  // Waits for the teardowns Destroy left running (no shim outlives its test).
  void TearDown() override;
  // executor_, (re)made from the suite's environment: SetUp's, or a test's under another state of
  // the daemon (its shims and fork server start with it).
  void StartExecutor();

  // Drives `a` to completion on the test's io_context.
  template <typename T>
  T Await(asio::awaitable<T> a) {
    return testing_support::AwaitOn(io_, std::move(a));
  }
  void Await(asio::awaitable<void> a) { testing_support::AwaitOn(io_, std::move(a)); }

  // CI_TEST_ROOTLESS=1 (set by as_user.sh): the suite runs as an unprivileged user, so the
  // executor is rootless and, without a writable cgroup, limits are rlimits (docs/security.md
  // "Rootless").
  static bool Rootless();
  // CI_TEST_FORK_SERVER=1: Python programs run in the fork server's interpreter.
  static bool WithForkServer();
  // The executor reports the cgroup limits as downgraded (no OOM or pids-limit verdicts).
  bool WithoutCgroup() const;

  static SandboxSpec DefaultSpec();
  static RunPayload Python(const std::string& code,
                           std::chrono::milliseconds timeout = std::chrono::seconds(10));
  static RunPayload Shell(const std::string& script,
                          std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Prepare -> Run -> (Collect) -> Destroy. Asserts Prepare succeeded.
  Execution Execute(const SandboxSpec& spec, RunPayload payload,
                    std::optional<CollectLimits> collect = std::nullopt);

  asio::io_context io_;
  std::unique_ptr<Executor> executor_;
};

// A session sandbox (10 minutes) made for each test, destroyed after it.
class SessionSandboxTest : public SandboxTest {
 protected:
  void SetUp() override;
  void TearDown() override;
  std::unique_ptr<Sandbox> sandbox_;
};

// Host-side observations for leak checks.
// A file's contents, "" when it cannot be read: a /proc file whose process exits meanwhile fails
// the read with ESRCH (istreambuf_iterator would throw).
std::string ReadFileOrEmpty(const std::string& path);
int CountHostProcesses(const std::string& cmdline_with_nuls);
// A number of seconds to `sleep` that no other process on the host sleeps for (other suites run
// beside this one), so CountHostProcesses counts only the test's own.
std::string UniqueSleepSeconds();
// Mount points at or under /tmp, where a sandbox builds its root in a mount namespace of its own:
// one of them here is a sandbox's mount that got out. Other mounts come and go with whatever else
// runs on the host (container engines, image builds), so they are not looked at.
std::vector<std::string> ListSandboxRootMounts();
// Sandbox cgroups without any process: a snapshot for CgroupsLeakedSince.
std::vector<std::string> ListEmptyCgroups();
// The empty cgroups not in `before` that are still there 3 s on: a leak. Other daemons on this
// host (suites run side by side) make and remove cgroups of their own; theirs are empty only
// for a moment, and live cgroups are not counted.
std::vector<std::string> CgroupsLeakedSince(const std::vector<std::string>& before);

}  // namespace ci::testing_support
