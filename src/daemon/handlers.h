// The REST API of docs/api.md: routing and one handler per endpoint. Handlers speak HttpExchange,
// never Beast.
#pragma once

#include <string>

#include "core/executor.h"
#include "daemon/admission.h"
#include "daemon/config.h"
#include "daemon/execution_service.h"
#include "daemon/file_store.h"
#include "daemon/http_exchange.h"
#include "daemon/metrics.h"
#include "daemon/responses.h"

namespace ci {

class ApiHandlers {
 public:
  ApiHandlers(const Config& config, Executor& executor, FileStore& store, ExecutionService& service,
              Admission& admission, Metrics& metrics);
  asio::awaitable<void> Handle(HttpExchange& ex);
  // The cached result of the background backend check, served by /health.
  void SetHealth(Status status) { health_ = std::move(status); }

 private:
  HealthInfo Info(const Status& backend) const;
  asio::awaitable<void> Health(HttpExchange& ex);
  asio::awaitable<void> Ready(HttpExchange& ex);
  asio::awaitable<void> ExecuteBatchRoute(HttpExchange& ex);
  asio::awaitable<void> ExecuteStreamRoute(HttpExchange& ex);
  asio::awaitable<void> Execute(HttpExchange& ex, bool stream);
  // Each returns the outcome for the metrics: "ok", "timed_out" or "error".
  asio::awaitable<std::string> ExecuteBatch(HttpExchange& ex, ExecutionPlan plan);
  asio::awaitable<std::string> ExecuteStream(HttpExchange& ex, ExecutionPlan plan);
  asio::awaitable<void> MetricsText(HttpExchange& ex);
  asio::awaitable<void> Languages(HttpExchange& ex);
  asio::awaitable<void> UploadFile(HttpExchange& ex);
  asio::awaitable<void> ListFiles(HttpExchange& ex);
  asio::awaitable<void> GetFile(HttpExchange& ex, const std::string& id);
  asio::awaitable<void> DeleteFile(HttpExchange& ex, const std::string& id);

  const Config& config_;
  Executor& executor_;
  FileStore& store_;
  ExecutionService& service_;
  Admission& admission_;
  Metrics& metrics_;
  Status health_;
};

}  // namespace ci
