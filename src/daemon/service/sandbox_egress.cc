#include "daemon/service/sandbox_egress.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>

namespace ci::daemon {

namespace asio = boost::asio;

const std::vector<std::string>& EgressEnvironment() {
  static const std::vector<std::string> env = [] {
    const std::string url = "http://127.0.0.1:" + std::to_string(kEgressPort);
    // What stays inside the sandbox never goes to the proxy (nothing else is reachable anyway).
    const std::string local = "localhost,127.0.0.1,::1";
    return std::vector<std::string>{"HTTP_PROXY=" + url,       "HTTPS_PROXY=" + url,
                                    "http_proxy=" + url,       "https_proxy=" + url,
                                    "NO_PROXY=" + local,       "no_proxy=" + local,
                                    "npm_config_proxy=" + url, "npm_config_https_proxy=" + url};
  }();
  return env;
}

Result<EgressPolicy> EgressFor(const std::optional<NetworkRequest>& network,
                               const EgressPolicy& fallback, const EgressPolicy& max) {
  if (!network) return fallback;
  EgressPolicy requested;
  for (auto [rules, into] : {std::pair{&network->allow_out, &requested.allow},
                             std::pair{&network->deny_out, &requested.deny}}) {
    for (const std::string& text : *rules) {
      auto rule = ParseEgressRule(text);
      if (!rule.ok()) return Status::Error("network: " + rule.status().message());
      into->push_back(std::move(rule).value());
    }
  }
  auto narrowed = Narrow(requested, max);
  if (!narrowed.ok()) return Status::Error("network.allow_out: " + narrowed.status().message());
  return narrowed;
}

void SandboxEgress::Stop() {
  if (!listener) return;
  listener->Close();
  proxy->CloseAll();
}

asio::awaitable<Result<SandboxEgress>> StartEgress(
    Sandbox& sandbox, const EgressPolicy& policy,
    const std::map<std::string, std::vector<asio::ip::address>>& hosts) {
  Result<std::shared_ptr<InsideListener>> listener = co_await sandbox.ListenInside(kEgressPort);
  if (!listener.ok()) co_return listener.status();
  auto ex = co_await asio::this_coro::executor;
  SandboxEgress out;
  out.listener = std::move(listener).value();
  EgressProxyOptions options;
  options.policy = policy;
  options.hosts = hosts;
  out.proxy = std::make_shared<EgressProxy>(ex, std::move(options));
  // The accept loop holds the listener until Stop closes it.
  asio::co_spawn(
      ex,
      [proxy = out.proxy, listener = out.listener]() -> asio::awaitable<void> {
        co_await proxy->Accept(*listener);
      },
      asio::detached);
  co_return out;
}

}  // namespace ci::daemon
