// The daemon's parts wired together once, for `serve` and for the tests that run the daemon
// against a fake executor (tests/daemon/fake_daemon.h): warm pool, execution service, admission,
// metrics, sessions, the API fronts (REST, MCP) behind the router and the HTTP server, on one
// io_context.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <string>

#include "core/executor.h"
#include "daemon/api/handlers.h"
#include "daemon/auth/key_quotas.h"
#include "daemon/config/config.h"
#include "daemon/e2b/e2b_front.h"
#include "daemon/files/file_store.h"
#include "daemon/front/router.h"
#include "daemon/http/http_server.h"
#include "daemon/mcp/mcp_front.h"
#include "daemon/service/admission.h"
#include "daemon/service/execution_service.h"
#include "daemon/service/metrics.h"
#include "daemon/service/warm_pool.h"
#include "daemon/sessions/session_manager.h"

namespace ci::daemon {

class Daemon {
 public:
  // Nothing runs yet: Listen() binds HOST:PORT (or, given a socket-activated listening fd, accepts
  // on that), Start() starts the pool and accepting.
  Daemon(asio::io_context& io, const Config& config, Executor& executor, FileStore& store,
         std::string seccomp_profile_json);
  Status Listen(int listening_fd = -1) {
    return listening_fd >= 0 ? server_.Adopt(listening_fd) : server_.Listen();
  }
  void Start();
  // Requests then need a key of `keys` (each key's share follows the file); nullptr: none do.
  void SetApiKeys(ApiKeys* keys);
  ~Daemon() { store_.SetShares({}); }  // the shares read quotas_

  // Stops accepting, lets running executions finish for `grace`, kills what is left, ends every
  // session and waits for the connections and the pool's sandboxes to be gone: no sandbox is
  // left behind (every execution awaits its Destroy(), the pool's Drain() what the backend
  // removes in the background).
  asio::awaitable<void> Shutdown(std::chrono::seconds grace);

  ExecutionService& service() { return service_; }
  SessionManager& sessions() { return sessions_; }
  Admission& admission() { return admission_; }
  KeyQuotas& quotas() { return quotas_; }
  ApiHandlers& handlers() { return handlers_; }
  HttpServer& server() { return server_; }

 private:
  FileStore& store_;
  KeyQuotas quotas_;
  WarmPool pool_;
  ExecutionService service_;
  Admission admission_;
  Admission model_calls_;
  Metrics metrics_;
  SessionManager sessions_;
  ProgramRunner runner_;  // the tools' programs
  SandboxTools tools_;
  ApiHandlers handlers_;  // the REST front
  McpFront mcp_;
  E2bFront e2b_;
  Router router_;
  HttpServer server_;
};

}  // namespace ci::daemon
