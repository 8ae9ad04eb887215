#include "daemon/cli/local_service.h"

#include <stdlib.h>

#include <filesystem>

#include "daemon/backends/local_options.h"
#include "daemon/backends/seccomp_profile.h"
#include "runtime/daemon/local_executor.h"

namespace ci::daemon {

Result<std::unique_ptr<LocalService>> LocalService::Create(const Config& config) {
  auto seccomp = LoadSeccompProfile(config);
  if (!seccomp.ok()) return seccomp.status();
  std::unique_ptr<LocalService> local(new LocalService());
  // A private, throw-away store: these commands keep nothing a program writes.
  std::string dir = (std::filesystem::temp_directory_path() / "code-interpreter-run-XXXXXX");
  if (::mkdtemp(dir.data()) == nullptr) return Status::Errno("mkdtemp " + dir, errno);
  local->dir_ = dir;
  auto store = FileStore::Open(dir + "/store");
  if (!store.ok()) return store.status();
  local->store_ = std::move(store).value();
  runtime::LocalExecutorOptions options = LocalOptionsFromConfig(config);
  options.fork_server = false;  // a few executions: loading Python ahead would only add to them
  local->executor_ = runtime::MakeLocalExecutor(local->io_.get_executor(), options);
  local->service_ = std::make_unique<ExecutionService>(config, *local->executor_, *local->store_,
                                                       std::move(seccomp).value());
  return local;
}

LocalService::~LocalService() {
  service_.reset();
  executor_.reset();
  store_.reset();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

}  // namespace ci::daemon
