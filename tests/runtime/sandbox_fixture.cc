#include "sandbox_fixture.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <thread>

namespace ci::testing_support {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

bool SandboxTest::Rootless() {
  const char* v = std::getenv("CI_TEST_ROOTLESS");
  return v != nullptr && std::string(v) == "1";
}

bool SandboxTest::WithForkServer() {
  const char* v = std::getenv("CI_TEST_FORK_SERVER");
  return v != nullptr && std::string(v) == "1";
}

bool SandboxTest::WithoutCgroup() const {
  for (const Downgrade& d : executor_->enforcement(DefaultSpec()).downgrades) {
    if (d.measure == "memory limit (cgroup)") return true;
  }
  return false;
}

void SandboxTest::SetUp() {
  if (Rootless()) {
    ASSERT_NE(::geteuid(), 0u) << "CI_TEST_ROOTLESS=1 is for an unprivileged user (as_user.sh)";
  } else if (::geteuid() != 0) {
    GTEST_SKIP() << "real sandboxes need root, or CI_TEST_ROOTLESS=1 (rootless mode)";
  }
  StartExecutor();
}

void SandboxTest::StartExecutor() {
  if (executor_) Await(executor_->Drain());
  const char* shim = std::getenv("CI_TEST_SHIM");
  ASSERT_NE(shim, nullptr) << "CI_TEST_SHIM must name the test-shim binary (set by meson test)";
  runtime::LocalExecutorOptions opts;
  opts.shim_binary = shim;
  // CI_TEST_FORK_SERVER=1 (the runtime-fork-server test): Python programs run in the fork
  // server's interpreter, under every check of the suite.
  opts.fork_server = WithForkServer();
  opts.sandbox_env = DefaultSandboxEnv();
  ASSERT_TRUE(runtime::CheckLocalRuntime(opts).ok()) << CheckLocalRuntime(opts).message();
  executor_ = runtime::MakeLocalExecutor(io_.get_executor(), opts);
}

void SandboxTest::TearDown() {
  if (executor_) Await(executor_->Drain());
}

SandboxSpec SandboxTest::DefaultSpec() {
  SandboxSpec spec;
  spec.env = DefaultSandboxEnv();
  return spec;
}

RunPayload SandboxTest::Python(const std::string& code, std::chrono::milliseconds timeout) {
  RunPayload p;
  p.argv = {"python3", "-c", code};
  p.timeout = timeout;
  return p;
}

RunPayload SandboxTest::Shell(const std::string& script, std::chrono::milliseconds timeout) {
  RunPayload p;
  p.argv = {"/bin/sh", "-c", script};
  p.timeout = timeout;
  return p;
}

Execution SandboxTest::Execute(const SandboxSpec& spec, RunPayload payload,
                               std::optional<CollectLimits> collect) {
  Execution ex;
  auto prepared = Await(executor_->Prepare(spec));
  EXPECT_TRUE(prepared.ok()) << prepared.status().message();
  if (!prepared.ok()) return ex;
  std::unique_ptr<Sandbox> sandbox = std::move(prepared.value());
  const auto start = Clock::now();
  auto since = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  };
  ex.outcome = Await(sandbox->Run(std::move(payload), [&](StreamKind k, std::string_view chunk) {
    if (ex.first_chunk_ms < 0) ex.first_chunk_ms = since();
    (k == StreamKind::kStdout ? ex.out : ex.err).append(chunk);
  }));
  ex.run_ms = since();
  if (collect) ex.collection = Await(sandbox->Collect(*collect));
  ex.report = Await(sandbox->Destroy());
  Await(executor_->Drain());  // the shim's cgroup removal and exit, after the report
  return ex;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();  // a read error sets failbit here instead of throwing
  return ss.str();
}

int CountHostProcesses(const std::string& cmdline_with_nuls) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (ReadFileOrEmpty(e.path() / "cmdline").rfind(cmdline_with_nuls, 0) == 0) ++n;
  }
  return n;
}

std::string UniqueSleepSeconds() {
  return std::to_string(100000000 + std::random_device{}() % 899999999);
}

std::vector<std::string> ListSandboxRootMounts() {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    if (point == "/tmp" || point.rfind("/tmp/", 0) == 0) out.push_back(point);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> ListEmptyCgroups() {
  std::vector<std::string> out;
  for (const char* dir :
       {"/sys/fs/cgroup/memory/code-interpreter", "/sys/fs/cgroup/pids/code-interpreter",
        "/sys/fs/cgroup/freezer/code-interpreter", "/sys/fs/cgroup/code-interpreter"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (!e.is_directory()) continue;
      std::ifstream procs(e.path() / "cgroup.procs");
      std::string first;
      if (!(procs >> first)) out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

std::vector<std::string> Minus(const std::vector<std::string>& a,
                               const std::vector<std::string>& b) {
  std::vector<std::string> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

}  // namespace

std::vector<std::string> CgroupsLeakedSince(const std::vector<std::string>& before) {
  std::vector<std::string> left = Minus(ListEmptyCgroups(), before);
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  while (!left.empty() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::vector<std::string> now = Minus(ListEmptyCgroups(), before);
    std::vector<std::string> both;
    std::set_intersection(left.begin(), left.end(), now.begin(), now.end(),
                          std::back_inserter(both));
    left = std::move(both);
  }
  return left;
}

void SessionSandboxTest::SetUp() {
  SandboxTest::SetUp();
  SandboxSpec spec = DefaultSpec();
  spec.session_expires_at = static_cast<int64_t>(std::time(nullptr)) + 600;
  auto prepared = Await(executor_->Prepare(spec));
  ASSERT_TRUE(prepared.ok()) << prepared.status().message();
  sandbox_ = std::move(prepared.value());
}

void SessionSandboxTest::TearDown() {
  if (sandbox_) Await(sandbox_->Destroy());
  SandboxTest::TearDown();
}

}  // namespace ci::testing_support
