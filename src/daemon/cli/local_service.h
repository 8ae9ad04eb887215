// The execution service of the commands that run programs without a daemon (`run`, `ask`): a
// local executor on a private io_context and a throw-away file store, removed at the end.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>

#include "core/executor.h"
#include "core/status.h"
#include "daemon/config/config.h"
#include "daemon/files/file_store.h"
#include "daemon/service/execution_service.h"

namespace ci::daemon {

class LocalService {
 public:
  static Result<std::unique_ptr<LocalService>> Create(const Config& config);
  ~LocalService();

  boost::asio::io_context& io() { return io_; }
  ExecutionService& service() { return *service_; }

 private:
  LocalService() = default;
  boost::asio::io_context io_{1};
  std::string dir_;
  std::unique_ptr<FileStore> store_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<ExecutionService> service_;
};

}  // namespace ci::daemon
