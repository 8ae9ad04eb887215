#include "fake_daemon.h"

#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <filesystem>
#include <sstream>

#include "core/json.h"
#include "core/sleep.h"

namespace ci::daemon {
namespace {

std::unique_ptr<FileStore> OpenStore(const Config& c) {
  auto store = FileStore::Open(c.file_storage_dir, c.file_storage_max_mb << 20);
  if (!store.ok()) {
    ADD_FAILURE() << "FileStore::Open: " << store.status().message();
    std::abort();
  }
  return std::move(store).value();
}

HttpServerOptions ServerOptions(const Config& c) {
  HttpServerOptions http;
  http.host = c.host;
  http.port = c.port;
  http.read_timeout = std::chrono::seconds(c.http_read_timeout_sec);
  http.idle_timeout = std::chrono::seconds(c.http_idle_timeout_sec);
  return http;
}

}  // namespace

Config FakeDaemon::TestConfig() {
  Config c;
  c.host = "127.0.0.1";
  c.port = 0;
  c.warm_pool_size = 0;
  std::string dir = (std::filesystem::temp_directory_path() / "fake-daemon-files-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) std::abort();
  c.file_storage_dir = dir;
  return c;
}

FakeDaemon::FakeDaemon(Config config, FakeExecutor::Options options)
    : config_(std::move(config)),
      store_(OpenStore(config_)),
      executor_(io_.get_executor(), options),
      pool_(io_.get_executor(), executor_, config_.warm_pool_size),
      service_(config_, pool_, *store_, /*seccomp_profile_json=*/""),
      admission_(io_.get_executor(), config_.max_concurrent_executions,
                 std::chrono::seconds(config_.execution_queue_timeout_sec)),
      metrics_(config_.max_concurrent_executions),
      sessions_(io_.get_executor(), config_, executor_, *store_, service_.spec()),
      handlers_(config_, executor_, *store_, service_, sessions_, admission_, metrics_),
      server_(io_, ServerOptions(config_),
              [this](HttpExchange& ex) { return handlers_.Handle(ex); }) {
  spdlog::set_level(spdlog::level::err);  // the tests say what they expect
  metrics_.CountSessionsWith([this] { return sessions_.count(); });
  pool_.Start(service_.spec());
  if (Status s = server_.Listen(); !s.ok()) {
    ADD_FAILURE() << "Listen: " << s.message();
    std::abort();
  }
  server_.Start();
  port_ = server_.local_endpoint().port();
  thread_ = std::thread([this] {
    auto work = asio::make_work_guard(io_);
    io_.run();
  });
}

void FakeDaemon::Stop() {
  if (stopped_) return;
  stopped_ = true;
  std::promise<void> done;
  asio::co_spawn(
      io_,
      [&]() -> asio::awaitable<void> {
        server_.StopAccepting();
        server_.CloseIdleConnections();
        service_.KillAll();
        co_await sessions_.DestroyAll();
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while ((service_.running() > 0 || server_.open_connections() > 0) &&
               std::chrono::steady_clock::now() < deadline) {
          server_.CloseIdleConnections();
          co_await Sleep(std::chrono::milliseconds(5));
        }
        co_await pool_.Drain();
        done.set_value();
      },
      asio::detached);
  done.get_future().wait();
  io_.stop();
  thread_.join();
}

// Polled on the daemon's thread: these are states, not events anyone announces. The bound is a
// hang guard, not a timing expectation.
void FakeDaemon::WaitUntil(const std::function<bool()>& pred) {
  auto bound = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!OnDaemon(pred)) {
    if (std::chrono::steady_clock::now() > bound) {
      ADD_FAILURE() << "the daemon never reached the state waited for";
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void FakeDaemon::WaitUntilIdle() {
  WaitUntil([this] { return server_.open_connections() == 0 && admission_.running() == 0; });
}

void FakeDaemon::WaitUntilQueued(size_t n) {
  WaitUntil([this, n] { return admission_.queued() == n; });
}

FakeDaemon::~FakeDaemon() {
  Stop();
  std::error_code ec;
  std::filesystem::remove_all(config_.file_storage_dir, ec);
}

void DaemonApiTest::Start(const std::function<void(Config&)>& configure,
                          FakeExecutor::Options options) {
  Config config = FakeDaemon::TestConfig();
  if (configure) configure(config);
  daemon_ = std::make_unique<FakeDaemon>(std::move(config), options);
  client_ = std::make_unique<HttpClient>(daemon_->port());
}

void DaemonApiTest::TearDown() {
  if (!daemon_) return;
  daemon_->Stop();
  FakeCounts c = fake().counts();
  EXPECT_EQ(c.live(), 0) << c.prepared << " sandbox(es) prepared, " << c.destroyed
                         << " destroyed: a sandbox leaked";
  daemon_.reset();
}

bool DaemonApiTest::LeaveWhileTheProgramRuns(const std::string& target, const std::string& json) {
  const int destroyed = fake().counts().destroyed;
  testing_support::AbandonedRequest request(daemon_->port(), target, json);
  if (!fake().WaitUntil([](const FakeCounts& c) { return c.runs_started == 1; })) return false;
  request.Close();
  return fake().WaitUntil([&](const FakeCounts& c) { return c.destroyed > destroyed; });
}

double DaemonApiTest::Metric(const std::string& series) {
  daemon_->WaitUntilIdle();  // every handler so far has recorded its request
  HttpReply r = client().Get("/metrics");
  std::istringstream lines(r.body);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return -1;
}

rapidjson::Document Json(const HttpReply& reply) {
  rapidjson::Document d;
  std::string why;
  if (!ParseJson(reply.body, d, why) || !d.IsObject()) d.SetObject();
  return d;
}

std::string Str(const rapidjson::Value& object, const char* key) {
  auto it = object.FindMember(key);
  if (it == object.MemberEnd() || !it->value.IsString()) return "";
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

std::vector<SseEvent> SseEvents(const std::string& body) {
  std::vector<SseEvent> out;
  size_t at = 0;
  for (size_t end; (end = body.find("\n\n", at)) != std::string::npos; at = end + 2) {
    std::string frame = body.substr(at, end - at);
    SseEvent e;
    std::istringstream lines(frame);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("event: ", 0) == 0) e.event = line.substr(7);
      if (line.rfind("data: ", 0) == 0) e.data = line.substr(6);
    }
    out.push_back(std::move(e));
  }
  if (at != body.size()) out.push_back({"<unterminated>", body.substr(at)});
  return out;
}

}  // namespace ci::daemon
