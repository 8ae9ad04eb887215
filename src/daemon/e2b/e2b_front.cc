#include "daemon/e2b/e2b_front.h"

#include "daemon/e2b/sandbox_plane.h"

namespace ci::daemon {

E2bFront::E2bFront(const Config& config, const ExecutionService& service, SessionManager& sessions,
                   const SandboxSpec& spec)
    : config_(config),
      sessions_(sessions),
      spec_(spec),
      control_(service, sessions, spec),
      processes_(sessions) {}

bool E2bFront::Claims(const HttpRequestHead& head) const {
  return e2b::IsSandboxPlane(head) || e2b::ControlPlane::Claims(head.path);
}

boost::asio::awaitable<void> E2bFront::Handle(HttpExchange& ex) {
  // The sandbox plane authenticates by the sandbox's own token, not by an API key.
  if (e2b::IsSandboxPlane(ex.head())) {
    const e2b::SandboxPlane plane{control_,
                                  processes_,
                                  contexts_,
                                  sessions_,
                                  spec_,
                                  config_.max_request_body_mb << 20,
                                  config_.max_file_size_mb << 20};
    co_return co_await e2b::HandleSandboxPlane(ex, plane);
  }
  if (keys_ != nullptr) {
    // X-API-KEY as E2B's SDKs send it; a bearer key as the daemon's other fronts take it.
    std::optional<std::string_view> key = ex.head().Header("x-api-key");
    std::optional<std::string_view> bearer = ex.head().Header("authorization");
    Caller caller =
        key || !bearer ? keys_->AuthenticateKey(key, "X-API-KEY") : keys_->Authenticate(bearer);
    if (!caller.ok()) co_return co_await ex.Respond(e2b::ErrorBody(401, caller.error));
    ex.client = std::move(caller.name);
  }
  if (!sessions_.supported()) {
    co_return co_await ex.Respond(e2b::ErrorBody(501, "this backend has no sessions"));
  }
  co_await control_.Handle(ex, config_.max_request_body_mb);
}

}  // namespace ci::daemon
