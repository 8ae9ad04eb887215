#include "daemon/cli/daemon.h"

#include <spdlog/spdlog.h>

#include "core/sleep.h"
#include "daemon/http/connection_limit.h"
#include "daemon/sessions/snapshot_mode.h"

namespace ci::daemon {
namespace {

using namespace std::chrono_literals;

HttpServerOptions ServerOptions(const Config& c) {
  HttpServerOptions http;
  http.host = c.host;
  http.port = c.port;
  http.read_timeout = std::chrono::seconds(c.http_read_timeout_sec);
  http.idle_timeout = std::chrono::seconds(c.http_idle_timeout_sec);
  http.max_connections = ConnectionCap(c.max_connections, RaiseOpenFileLimit());
  return http;
}

}  // namespace

Daemon::Daemon(asio::io_context& io, const Config& config, Executor& executor, FileStore& store,
               std::string seccomp_profile_json)
    : store_(store),
      quotas_(config),
      pool_(io.get_executor(), executor),
      service_(config, pool_, store, std::move(seccomp_profile_json)),
      admission_(io.get_executor(), config.max_concurrent_executions,
                 std::chrono::seconds(config.execution_queue_timeout_sec),
                 [this](const std::string& client) { return quotas_.For(client).executions; }),
      model_calls_(io.get_executor(), config.max_concurrent_model_calls,
                   std::chrono::seconds(config.execution_queue_timeout_sec),
                   [this](const std::string& client) { return quotas_.For(client).model_calls; }),
      metrics_(config.max_concurrent_executions),
      sessions_(io.get_executor(), config, executor, store, service_.spec(), service_.egress(),
                [this](const std::string& client) { return quotas_.For(client).sessions; }),
      runner_(service_, &admission_),
      tools_(runner_, nullptr),
      handlers_(config, executor, store, service_, sessions_, admission_, model_calls_, quotas_,
                metrics_, runner_, tools_),
      mcp_(config, service_, tools_,
           [this](const std::string& client) { return quotas_.For(client).mcp_sessions; }),
      e2b_(config, service_, sessions_, service_.spec()),
      // The REST front last: it claims what the others do not.
      router_({&mcp_, &e2b_, &handlers_},
              BrowserPolicy{config.allowed_origins, config.allowed_hosts, true, config.host}),
      server_(io, ServerOptions(config), [this](HttpExchange& ex) { return router_.Handle(ex); }) {
  store_.SetShares([this](const std::string& client) { return quotas_.For(client).file_bytes; });
  metrics_.CountSessionsWith([this] { return sessions_.count(); });
  metrics_.ReadWarmPoolsWith([this] { return pool_.stats(); });
  metrics_.ReadBackendWith([&executor] { return executor.metrics(); });
  metrics_.ReadEgressWith([this] { return service_.egress().counters.get(); });
  service_.SetKeyEgress([this](const std::string& client) { return quotas_.For(client).egress; });
}

void Daemon::SetApiKeys(ApiKeys* keys) {
  router_.SetApiKeys(keys);
  if (keys == nullptr) return;
  keys->OnLoad([this](const std::vector<ApiKey>& k) {
    quotas_.Set(k);
    admission_.SharesChanged();
    model_calls_.SharesChanged();
  });
}

void Daemon::Start() {
  pool_.Start(service_.WarmPools());
  (void)SessionSnapshotMode();  // probed now, not in a request
  sessions_.StartSweeps();
  server_.Start();
}

asio::awaitable<void> Daemon::Shutdown(std::chrono::seconds grace) {
  server_.StopAccepting();
  server_.CloseIdleConnections();
  auto deadline = std::chrono::steady_clock::now() + grace;
  if (service_.running() > 0 && grace.count() > 0) {
    spdlog::info("shutting down: waiting up to {} s for {} running execution(s)", grace.count(),
                 service_.running());
  }
  while (service_.running() > 0 && std::chrono::steady_clock::now() < deadline) {
    co_await Sleep(20ms);
  }
  if (service_.running() > 0) {
    spdlog::warn("shutting down: killing {} execution(s) still running", service_.running());
    service_.KillAll();
  }
  if (sessions_.count() > 0) {
    spdlog::info("shutting down: ending {} session(s)", sessions_.count());
  }
  co_await sessions_.DestroyAll();  // also ends the idle sweep
  auto hard_deadline = std::chrono::steady_clock::now() + 5s;
  while ((service_.running() > 0 || server_.open_connections() > 0) &&
         std::chrono::steady_clock::now() < hard_deadline) {
    server_.CloseIdleConnections();
    co_await Sleep(20ms);
  }
  co_await pool_.Drain();
}

}  // namespace ci::daemon
