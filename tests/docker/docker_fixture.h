// What the docker suites share: an executor on the real dockerd (skipping when none answers,
// failing under CI=true), Await on the test's io_context, and Engine API lookups of containers.
#pragma once

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "common/await.h"
#include "docker/docker_executor.h"
#include "docker/engine_client.h"
#include "docker/reaper.h"

namespace ci::docker {

class DockerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("DOCKER_TEST_DEBUG") != nullptr) spdlog::set_level(spdlog::level::debug);
    auto opts = Options();
    if (!opts.ok() && ci_) FAIL() << "CI=true: " << opts.status().message();
    if (!opts.ok()) GTEST_SKIP() << opts.status().message();
    opts_ = *opts;
    // No watchdog loop here: it would keep the io_context of Await busy forever. Check then
    // inspects (and pulls) itself.
    opts_.image_check_period = std::chrono::milliseconds(0);
    executor_ = MakeDockerExecutor(io_.get_executor(), opts_);
    Status s = Await(executor_->Check());
    if (!s.ok() && ci_) FAIL() << "CI=true and no usable dockerd: " << s.message();
    if (!s.ok()) GTEST_SKIP() << "no usable dockerd here: " << s.message();
  }

  // Runs the io_context until `done` (work detached from an awaited call, e.g. the reaper's
  // sweep after Check), for 10 s at most.
  void RunUntil(const std::function<bool()>& done) {
    for (int i = 0; i < 100 && !done(); ++i) io_.run_for(std::chrono::milliseconds(100));
  }

  // Recycled containers and removals in flight end with the test, as at a daemon's shutdown.
  void TearDown() override {
    if (executor_) Await(executor_->Drain());
  }

  // The executor's options; DockerTlsTest's come from its own DOCKER_* values.
  virtual Result<DockerExecutorOptions> Options() {
    return DockerOptionsFromEnv([](const char* n) { return std::getenv(n); });
  }

  template <typename T>
  T Await(asio::awaitable<T> a) {
    return testing_support::AwaitOn(io_, std::move(a));
  }

  std::unique_ptr<EngineClient> Client() {
    auto c = std::make_unique<EngineClient>(io_.get_executor(), opts_.endpoint,
                                            std::chrono::seconds(10));
    EXPECT_TRUE(Await(c->Negotiate()).ok());
    return c;
  }

  // The body of GET /containers/json?all=1 for our containers matching a `name` filter ("" when
  // none); `this_process`: only those owned by this test process (other daemons share dockerd).
  std::string OurContainers(const std::string& name, bool this_process = false) {
    auto c = Client();
    std::string owner;
    if (this_process) {
      std::string here = OwnerHere();  // "<host>@<pid ns>/<pid>": '@' and '/' escaped
      std::string escaped;
      for (char ch : here) escaped += ch == '/' ? "%2F" : ch == '@' ? "%40" : std::string(1, ch);
      owner = "%2C%22code-interpreter.owner%3D" + escaped + "%22";
    }
    std::string
        m = "GET",
        p = "/containers/json?all=1&filters=%7B%22label%22%3A%5B%22app%3Dcode-interpreter%22" +
            owner + "%5D%2C%22name%22%3A%5B%22" + name + "%22%5D%7D";
    auto r = Await(c->Request(m, p));
    if (!r.ok()) return r.status().message();
    return r->body == "[]\n" ? "" : r->body;
  }

  // In CI the suite must not silently skip: scripts/test.sh starts dockerd and builds the image.
  bool ci_ = std::getenv("CI") != nullptr && std::string(std::getenv("CI")) == "true";
  asio::io_context io_;
  DockerExecutorOptions opts_;
  std::unique_ptr<Executor> executor_;
};

}  // namespace ci::docker
