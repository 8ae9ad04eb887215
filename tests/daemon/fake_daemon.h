// The daemon as cli/serve.cc wires it (cli/daemon.h: WarmPool, ExecutionService, Admission,
// Metrics, SessionManager, ApiHandlers, HttpServer) with a FakeExecutor as its backend, serving
// real HTTP on a loopback port from a thread of its own, so a test talks to it with a blocking
// client. DaemonApiTest starts one per test and, at the end, shuts it down as serve.cc does and
// checks that every sandbox prepared was destroyed.
#pragma once

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/fake_executor.h"
#include "common/http_client.h"
#include "daemon/cli/daemon.h"
#include "daemon/config/config.h"
#include "daemon/files/file_store.h"

namespace ci::daemon {

using testing_support::FakeCounts;
using testing_support::FakeExecutor;
using testing_support::FakeGate;
using testing_support::FakeProcess;
using testing_support::HttpClient;
using testing_support::HttpReply;

class FakeDaemon {
 public:
  // Loopback, a kernel-chosen port, a fresh file store directory, no warm pool.
  static Config TestConfig();

  FakeDaemon(Config config, FakeExecutor::Options options);
  ~FakeDaemon();

  FakeExecutor& executor() { return executor_; }
  uint16_t port() const { return port_; }
  // Shutdown as serve.cc does it (Daemon::Shutdown, no grace): stop accepting, kill what runs,
  // end sessions, drain the pool. Idempotent.
  void Stop();

  // Runs `fn` on the daemon's thread (its objects are single-threaded) and returns the result.
  template <typename F>
  auto OnDaemon(F fn) -> decltype(fn()) {
    std::packaged_task<decltype(fn())()> task(std::move(fn));
    auto result = task.get_future();
    asio::post(io_, [&task] { task(); });
    return result.get();
  }
  // Runs `task` on the daemon's thread and blocks until it has finished.
  template <typename T>
  T Await(asio::awaitable<T> task) {
    return asio::co_spawn(io_, std::move(task), asio::use_future).get();
  }
  Daemon& wired() { return daemon_; }
  // Blocks until no request is in flight (every handler has finished, its metrics recorded).
  void WaitUntilIdle();
  // Blocks until `n` requests wait in the admission queue.
  void WaitUntilQueued(size_t n);

 private:
  void WaitUntil(const std::function<bool()>& pred);

  Config config_;
  asio::io_context io_{1};
  std::unique_ptr<FileStore> store_;
  FakeExecutor executor_;
  Daemon daemon_;
  uint16_t port_ = 0;
  std::thread thread_;
  bool stopped_ = false;
};

class DaemonApiTest : public ::testing::Test {
 protected:
  // A daemon on FakeDaemon::TestConfig() as `configure` changes it.
  void Start(const std::function<void(Config&)>& configure = nullptr,
             FakeExecutor::Options options = {});
  void TearDown() override;

  FakeExecutor& fake() { return daemon_->executor(); }
  FakeDaemon& daemon() { return *daemon_; }
  HttpClient& client() { return *client_; }
  // Sends `json` to `target`, waits until the program runs, then closes the connection (a client
  // that left) and waits until the sandbox is destroyed. False when either wait hung.
  bool LeaveWhileTheProgramRuns(const std::string& target, const std::string& json);
  // The value of one series of /metrics (`name{labels}` exactly as rendered), -1 when absent.
  double Metric(const std::string& series);
  // The same without waiting: while requests are in flight on purpose.
  double MetricNow(const std::string& series);

 private:
  std::unique_ptr<FakeDaemon> daemon_;
  std::unique_ptr<HttpClient> client_;
};

// A response body as JSON (an empty object when it is not JSON, so the test's checks fail).
rapidjson::Document Json(const HttpReply& reply);
std::string Str(const rapidjson::Value& object, const char* key);  // "" when not a string

struct SseEvent {
  std::string event;
  std::string data;
};
// The frames of an SSE body ("event: X\ndata: Y\n\n" each), in order.
std::vector<SseEvent> SseEvents(const std::string& body);

}  // namespace ci::daemon
