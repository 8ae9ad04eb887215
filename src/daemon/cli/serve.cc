#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "core/sleep.h"
#include "core/unix_time.h"
#include "daemon/api/handlers.h"
#include "daemon/backends/backends.h"
#include "daemon/backends/seccomp_profile.h"
#include "daemon/bootstrap/bootstrap.h"
#include "daemon/cli/cli.h"
#include "daemon/cli/daemon.h"
#include "daemon/cli/logging.h"
#include "daemon/cli/model_setup.h"
#include "daemon/cli/systemd_notify.h"
#include "daemon/config/config.h"
#include "daemon/files/file_store.h"
#include "daemon/http/socket_activation.h"
#include "daemon/service/execution_service.h"

namespace ci::daemon {
namespace {

using namespace std::chrono_literals;
using asio::use_awaitable;

// Deletes stored files older than FILE_TTL_SEC, and what crashed processes left.
asio::awaitable<void> SweepFiles(FileStore& store, const Config& config) {
  auto period = std::chrono::seconds(std::clamp<uint64_t>(config.file_ttl_sec / 4, 1, 60));
  for (;;) {
    const double now = UnixNow();
    if (size_t n = store.SweepOlderThan(static_cast<double>(config.file_ttl_sec), now)) {
      spdlog::info("file sweep: deleted {} file(s) older than {} s", n, config.file_ttl_sec);
    }
    // Replicas sharing the directory may crash and leave temp files to the ones that live on.
    if (size_t n = store.RemoveLeftovers(now)) {
      spdlog::info("file sweep: removed {} leftover(s) of crashed processes", n);
    }
    co_await Sleep(period);
  }
}

// Refreshes the cached backend status that /health serves, so /health never blocks.
asio::awaitable<void> CheckHealth(Executor& executor, ApiHandlers& handlers, const Config& config) {
  Status last;
  for (;;) {
    Status s = co_await executor.Check();
    if (s.ok() != last.ok() || (!s.ok() && s.message() != last.message())) {
      if (s.ok()) {
        spdlog::info("backend check: ok");
      } else {
        spdlog::error("backend check failed: {}", s.message());
      }
    }
    handlers.SetHealth(s);
    last = s;
    co_await Sleep(std::chrono::seconds(config.health_check_interval_sec));
  }
}

// Logs every hardening downgrade once, with its fix; under STRICT_HARDENING they stop startup.
Status ReportDowngrades(const Enforcement& e, bool strict) {
  for (const auto& d : e.downgrades) {
    spdlog::warn("hardening downgrade: {} is not enforced: {}. Fix: {}", d.measure, d.reason,
                 d.fix);
  }
  if (strict && !e.downgrades.empty()) {
    return Status::Error("STRICT_HARDENING=true and " + std::to_string(e.downgrades.size()) +
                         " hardening measure(s) cannot be enforced on this host (see above); "
                         "fix them or unset STRICT_HARDENING");
  }
  std::string enforced;
  for (const std::string& m : MeasureNames(e.enforced)) {
    if (!enforced.empty()) enforced += ", ";
    enforced += m;
  }
  spdlog::info("hardening enforced: {}", enforced);
  return Status();
}

// Runs handlers of `io` until `finished`. An io_context that ran out of work stops, and a stopped
// one runs nothing until restarted: so it is restarted before and after, for what comes next.
template <typename Predicate>
void RunUntil(asio::io_context& io, Predicate finished) {
  io.restart();
  while (!finished()) {
    if (io.run_one() == 0) io.restart();
  }
  io.restart();
}

// Runs `op` on `io` until it finishes (startup, before io.run()); what it started keeps running.
template <typename T>
T RunToCompletion(asio::io_context& io, asio::awaitable<T> op) {
  std::optional<T> result;
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { result.emplace(co_await std::move(op)); },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  RunUntil(io, [&result] { return result.has_value(); });
  return std::move(*result);
}

void RunToCompletion(asio::io_context& io, asio::awaitable<void> op) {
  bool done = false;
  asio::co_spawn(io, std::move(op), [&done](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
    done = true;
  });
  RunUntil(io, [&done] { return done; });
}

// Docker-in-Docker: the nested dockerd stops after the daemon's own containers are gone.
asio::awaitable<void> StopNestedDockerd(const Bootstrapped& booted) {
  if (booted.dockerd) co_await booted.dockerd->Stop(std::chrono::seconds(20));
}

}  // namespace

int Serve() {
  auto config = LoadConfig([](const char* name) { return std::getenv(name); });
  if (!config.ok()) {
    std::fprintf(stderr, "code-interpreter: %s\n", config.status().message().c_str());
    return 2;
  }
  const Config& c = *config;
  SetupLogging(c.log_level, c.log_format);
  // First: the key leaves the environment before any child (a nested dockerd) could inherit it.
  auto model_config = LoadModelConfig(c);
  if (!model_config.ok()) {
    spdlog::critical("{}", model_config.status().message());
    return 2;
  }
  auto store = FileStore::Open(c.file_storage_dir, c.file_storage_max_mb << 20);
  if (!store.ok()) {
    spdlog::critical("FILE_STORAGE_DIR: {}", store.status().message());
    return 2;
  }

  auto seccomp = LoadSeccompProfile(c);
  if (!seccomp.ok()) {
    spdlog::critical("{}", seccomp.status().message());
    return 2;
  }
  asio::io_context io(1);
  auto booted = RunToCompletion(io, Bootstrap(c, *seccomp, io.get_executor()));
  if (!booted.ok()) {
    spdlog::critical("{}", booted.status().message());
    return 2;
  }
  Config resolved = c;
  resolved.executor_backend = booted->backend;
  BackendFacts facts;
  if (booted->deployment.engine) {
    facts.docker_engine_applies_limits = booted->deployment.engine->applies_limits;
  }
  auto made = MakeExecutor(resolved, io.get_executor(), facts);
  if (!made.ok()) {
    spdlog::critical("{}", made.status().message());
    RunToCompletion(io, StopNestedDockerd(*booted));
    return 2;
  }
  std::unique_ptr<Executor> executor = std::move(made).value();
  if (!c.egress_max.none()) {
    spdlog::info("egress: sandboxes reach {} through the daemon's proxy (at most {})",
                 c.egress_default.ToString(), c.egress_max.ToString());
  }
  std::unique_ptr<ApiKeys> keys;
  if (!c.api_keys_file.empty()) {
    auto opened = ApiKeys::Open(c.api_keys_file);
    if (!opened.ok()) {
      spdlog::critical("{}", opened.status().message());
      return 2;
    }
    keys = std::move(opened).value();
  }
  std::unique_ptr<llm::Provider> model;
  if (model_config->configured()) model = llm::MakeProvider(io.get_executor(), *model_config);
  Daemon daemon(io, resolved, *executor, **store, std::move(seccomp).value());
  daemon.SetApiKeys(keys.get());
  daemon.handlers().SetModel(model.get());
  daemon.handlers().SetDeployment([&booted] { return booted->Info(); });
  ExecutionService& service = daemon.service();
  // Before any sandbox exists (the warm pool starts below): the report is of this very spec.
  Enforcement enforcement = executor->enforcement(service.spec());
  for (const Downgrade& d : booted->deployment.downgrades) enforcement.downgrades.push_back(d);
  if (Status s = ReportDowngrades(enforcement, c.strict_hardening); !s.ok()) {
    spdlog::critical("{}", s.message());
    RunToCompletion(io, StopNestedDockerd(*booted));
    return 2;
  }
  Result<int> activated = TakeSystemdListenFd();  // -1: bind HOST:PORT
  if (Status s = activated.ok() ? daemon.Listen(*activated) : activated.status(); !s.ok()) {
    spdlog::critical("{}", s.message());
    return 2;
  }
  daemon.Start();
  auto ep = daemon.server().local_endpoint();
  std::string languages;
  for (const auto& l : service.languages()) languages += (languages.empty() ? "" : ", ") + l.name;
  spdlog::info("code-interpreter {} mode={} backend={} languages=[{}] files={}", CI_VERSION,
               booted->deployment.mode, executor->name(), languages, c.file_storage_dir);
  spdlog::info("listening on {}:{} (at most {} connections: MAX_CONNECTIONS)",
               ep.address().to_string(), ep.port(), daemon.server().max_connections());
  if (keys) {
    spdlog::info(
        "API keys: {} from {} (Authorization: Bearer; /health and /ready open, /metrics {})",
        keys->count(), c.api_keys_file, c.metrics_require_api_key ? "with a key" : "open");
  } else if (!ep.address().is_loopback()) {
    spdlog::warn(
        "no API_KEYS_FILE: anyone who reaches port {} may run code (docs/api.md \"API keys\")",
        ep.port());
    if (ep.address().is_unspecified() && c.allowed_hosts.empty()) {
      spdlog::warn(
          "no ALLOWED_HOSTS on every address: any Host is served, so a web page whose "
          "DNS name is rebound to this machine can read what GET serves "
          "(docs/security.md \"Browsers\")");
    }
  }
  if (model) {
    spdlog::info("agent loop: {}", DescribeModel(*model_config));
  } else {
    spdlog::info(
        "agent loop off (no LLM_PROVIDER): /v1/agent/solve answers 503, solve_task is "
        "not offered (docs/agent.md \"The agent loop\")");
  }

  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        Status s = co_await service.ProbeLanguages();
        if (!s.ok()) {
          spdlog::error("startup self-test failed: {} (run `code-interpreter doctor`)",
                        s.message());
          SystemdReady("serving; startup self-test failed: " + s.message());
          co_return;
        }
        for (const auto& l : service.languages()) {
          spdlog::info("language {} {} ({})", l.name, l.version, l.interpreter);
        }
        SystemdReady(fmt::format("serving on port {}, languages {}", ep.port(), languages));
      },
      asio::detached);
  asio::co_spawn(io, SweepFiles(**store, c), asio::detached);
  asio::co_spawn(io, CheckHealth(*executor, daemon.handlers(), c), asio::detached);
  asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("received signal {}: shutting down", sig);
    SystemdNotify("STOPPING=1\nSTATUS=shutting down: draining executions");
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          co_await daemon.Shutdown(std::chrono::seconds(c.shutdown_grace_sec));
          co_await StopNestedDockerd(*booted);
          spdlog::info("shutdown complete");
          io.stop();
        },
        asio::detached);
  });
  io.run();
  return 0;
}

}  // namespace ci::daemon
