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
#include "runtime/local_executor.h"

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
  // executor is rootless and, without a writable cgroup, limits are rlimits (README "Rootless").
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

// Host-side observations for leak checks.
int CountHostProcesses(const std::string& cmdline_with_nuls);
int CountHostMounts();
// Sandbox cgroups without any process: a leak unless it existed before (other users of this host
// may run sandboxes concurrently, so live cgroups are not counted).
std::vector<std::string> ListEmptyCgroups();

}  // namespace ci::testing_support
