// GET /health, /ready, /metrics, /v1/languages and /openapi.json.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include "daemon/api/handlers.h"
#include "daemon/api/openapi.h"
#include "daemon/api/responses.h"
#include "daemon/service/async_event.h"
#include "daemon/sessions/snapshot_mode.h"

namespace ci::daemon {

HealthInfo ApiHandlers::Info(const Status& backend) const {
  HealthInfo info;
  info.ok = backend.ok();
  if (!info.ok) info.message = backend.message();
  info.backend = std::string(executor_.name());
  info.network_isolation = executor_.network_isolation();
  const Config& config = service_.config();
  info.egress = config.egress_max.none() ? "none"
                                         : config.egress_default.ToString() + " (at most " +
                                               config.egress_max.ToString() + ")";
  info.hardening = executor_.enforcement(service_.spec());
  info.backend_downgrades = executor_.downgrades();
  const SnapshotMode& snapshots = SessionSnapshotMode();
  info.session_snapshots = snapshots.mode + " (" + snapshots.criu + ")";
  if (deployment_) info.deployment = deployment_();
  // The cached backend check may predate a crash of Docker-in-Docker's dockerd: say so now.
  if (const auto& nested = info.deployment.nested_dockerd; nested && !nested->answering) {
    info.ok = false;
    info.message = "the nested dockerd is not answering" +
                   (nested->last_exit.empty() ? std::string() : " (it " + nested->last_exit + ")") +
                   ": restarting it (see the log)";
  }
  return info;
}

asio::awaitable<void> ApiHandlers::Health(HttpExchange& ex, const std::string&) {
  co_await ex.Respond(JsonResponse(200, HealthJson(Info(health_))));
}

asio::awaitable<void> ApiHandlers::Ready(HttpExchange& ex, const std::string&) {
  // A fresh check, bounded so a hung backend makes /ready fail rather than hang.
  auto executor = co_await asio::this_coro::executor;
  auto result = std::make_shared<std::optional<Status>>();
  auto done = std::make_shared<AsyncEvent>(executor);
  asio::co_spawn(
      executor,
      [this, result, done]() -> asio::awaitable<void> {
        Status s = co_await executor_.Check();
        *result = std::move(s);
        done->Notify();
      },
      asio::detached);
  asio::steady_timer deadline(
      executor, std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::duration<double>(config_.backend_check_timeout_sec)));
  deadline.async_wait([done](const boost::system::error_code&) { done->Notify(); });
  if (!result->has_value()) co_await done->Wait();
  deadline.cancel();
  Status status = result->has_value()
                      ? **result
                      : Status::Error("backend check did not answer within " +
                                      std::to_string(config_.backend_check_timeout_sec) + " s");
  const int code = status.ok() ? 200 : 503;
  co_await ex.Respond(JsonResponse(code, HealthJson(Info(status))));
}

asio::awaitable<void> ApiHandlers::MetricsText(HttpExchange& ex, const std::string&) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics_.Render();
  co_await ex.Respond(std::move(r));
}

asio::awaitable<void> ApiHandlers::Languages(HttpExchange& ex, const std::string&) {
  const std::vector<Language>* languages = co_await service_.ProbedLanguages();
  co_await ex.Respond(JsonResponse(200, LanguagesJson(*languages)));
}

asio::awaitable<void> ApiHandlers::OpenApi(HttpExchange& ex, const std::string&) {
  co_await ex.Respond(JsonResponse(200, std::string(OpenApiDocument())));
}

}  // namespace ci::daemon
