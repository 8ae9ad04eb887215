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

}  // namespace

Config FakeDaemon::TestConfig() {
  Config c;
  c.host = "127.0.0.1";
  c.port = 0;
  c.warm_pool_size = c.warm_pool_size_bash = c.warm_pool_size_javascript = c.warm_pool_size_go = 0;
  std::string dir = (std::filesystem::temp_directory_path() / "fake-daemon-files-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) std::abort();
  c.file_storage_dir = dir;
  return c;
}

FakeDaemon::FakeDaemon(Config config, FakeExecutor::Options options)
    : config_(std::move(config)),
      store_(OpenStore(config_)),
      executor_(io_.get_executor(), options),
      daemon_(io_, config_, executor_, *store_, /*seccomp_profile_json=*/"") {
  spdlog::set_level(spdlog::level::err);  // the tests say what they expect
  if (Status s = daemon_.Listen(); !s.ok()) {
    ADD_FAILURE() << "Listen: " << s.message();
    std::abort();
  }
  daemon_.Start();
  port_ = daemon_.server().local_endpoint().port();
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
        co_await daemon_.Shutdown(std::chrono::seconds(0));
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
  WaitUntil([this] {
    return daemon_.server().open_connections() == 0 && daemon_.admission().running() == 0;
  });
}

void FakeDaemon::WaitUntilQueued(size_t n) {
  WaitUntil([this, n] { return daemon_.admission().queued() == n; });
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
  return MetricNow(series);
}

double DaemonApiTest::MetricNow(const std::string& series) {
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
