// The REST API of docs/api.md: routing and one handler per endpoint. Handlers speak HttpExchange,
// never Beast.
#pragma once

#include <string>

#include "core/executor.h"
#include "daemon/config.h"
#include "daemon/execution_service.h"
#include "daemon/file_store.h"
#include "daemon/http_exchange.h"
#include "daemon/responses.h"

namespace ci {

class ApiHandlers {
 public:
  ApiHandlers(const Config& config, Executor& executor, FileStore& store,
              ExecutionService& service);
  asio::awaitable<void> Handle(HttpExchange& ex);
  // The cached result of the background backend check, served by /health.
  void SetHealth(Status status) { health_ = std::move(status); }

 private:
  HealthInfo Info(const Status& backend) const;
  asio::awaitable<void> Health(HttpExchange& ex);
  asio::awaitable<void> Ready(HttpExchange& ex);
  asio::awaitable<void> Execute(HttpExchange& ex, bool stream);
  asio::awaitable<void> ExecuteBatch(HttpExchange& ex, ExecutionPlan plan);
  asio::awaitable<void> ExecuteStream(HttpExchange& ex, ExecutionPlan plan);
  asio::awaitable<void> Languages(HttpExchange& ex);
  asio::awaitable<void> UploadFile(HttpExchange& ex);
  asio::awaitable<void> ListFiles(HttpExchange& ex);
  asio::awaitable<void> GetFile(HttpExchange& ex, const std::string& id);
  asio::awaitable<void> DeleteFile(HttpExchange& ex, const std::string& id);

  const Config& config_;
  Executor& executor_;
  FileStore& store_;
  ExecutionService& service_;
  Status health_;
};

}  // namespace ci
