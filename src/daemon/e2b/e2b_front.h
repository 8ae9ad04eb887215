// The E2B front (docs/e2b.md): E2B's control plane and sandbox plane, so that E2B's official SDKs
// work against the daemon with E2B_API_URL and E2B_SANDBOX_URL pointing at it. The control
// plane's key is X-API-KEY's (or a bearer key), the sandbox plane's the sandbox's access token;
// errors are E2B's {"code", "message"}.
#pragma once

#include "daemon/config/config.h"
#include "daemon/e2b/code_contexts.h"
#include "daemon/e2b/control_plane.h"
#include "daemon/e2b/process_table.h"
#include "daemon/front/front.h"

namespace ci::daemon {

class E2bFront final : public Front {
 public:
  // `service`: the callers' egress bounds (E2B's network options).
  E2bFront(const Config& config, const ExecutionService& service, SessionManager& sessions,
           const SandboxSpec& spec);

  bool Claims(const HttpRequestHead& head) const override;
  boost::asio::awaitable<void> Handle(HttpExchange& ex) override;
  void SetApiKeys(ApiKeys* keys) override { keys_ = keys; }

 private:
  const Config& config_;
  SessionManager& sessions_;
  const SandboxSpec& spec_;
  e2b::ControlPlane control_;
  e2b::ProcessTable processes_;
  e2b::CodeContexts contexts_;
  ApiKeys* keys_ = nullptr;
};

}  // namespace ci::daemon
