#include "daemon/service/sandbox_egress.h"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fstream>

#include "daemon/egress/egress_interception.h"
#include "daemon/egress/egress_secrets.h"

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

EgressShared MakeEgressShared(const Config& config, const std::string& dir) {
  EgressShared out;
  out.hosts = config.egress_hosts;
  if (!config.egress_max.none()) out.thread = std::make_shared<EgressThread>();
  out.max_connections = config.egress_max_connections;
  out.bytes_per_second = config.egress_bandwidth_kbps * 1024;
  if (!config.egress_secrets_file.empty()) {
    auto secrets = EgressSecrets::Open(config.egress_secrets_file);
    if (!secrets.ok()) out.error = secrets.status().message();
    if (secrets.ok()) out.secrets = std::move(secrets).value();
  }
  if (!config.egress_tls_intercept.empty()) {
    auto made =
        EgressInterception::Create(config.egress_tls_intercept, config.egress_upstream_ca_file);
    Result<std::string> bundle = Status::Error("no CA");
    if (made.ok()) bundle = (*made)->SandboxTrustBundle();
    if (!bundle.ok()) out.error = (made.ok() ? bundle.status() : made.status()).message();
    if (bundle.ok()) {
      out.trust_file = dir + "/egress-trust.pem";
      std::ofstream f(out.trust_file, std::ios::binary | std::ios::trunc);
      f << *bundle;
      f.close();
      if (!f) out.error = "writing " + out.trust_file + " failed";
      out.interception = std::move(made).value();
    }
  }
  if (!out.error.empty()) spdlog::critical("egress: {}; sandboxes get no network", out.error);
  return out;
}

std::vector<std::string> EgressTrustEnvironment(const std::string& cwd) {
  const std::string path = cwd + "/" + std::string(kEgressTrustFile);
  std::vector<std::string> env;
  for (const char* name : {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT",
                           "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO"}) {
    env.push_back(std::string(name) + "=" + path);
  }
  return env;
}

void AddEgressTo(const EgressShared& shared, SandboxSpec* spec, std::vector<StagedFile>* files) {
  if (spec != nullptr) {
    spec->egress = true;
    spec->env.insert(spec->env.end(), EgressEnvironment().begin(), EgressEnvironment().end());
    if (!shared.trust_file.empty()) {
      for (std::string& kv : EgressTrustEnvironment(spec->cwd)) spec->env.push_back(kv);
    }
  }
  if (files != nullptr && !shared.trust_file.empty()) {
    files->push_back({std::string(kEgressTrustFile), shared.trust_file});
  }
}

Result<EgressBounds> BoundsFor(const Config& config,
                               const std::optional<std::vector<EgressRule>>& rules) {
  if (!rules) return EgressBounds{config.egress_default, config.egress_max};
  EgressPolicy own;
  own.allow = *rules;
  auto bounded = Narrow(own, config.egress_max);
  if (!bounded.ok()) return Status::Error("the API key's egress=: " + bounded.status().message());
  return EgressBounds{*bounded, *bounded};
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

asio::awaitable<void> SandboxEgress::Stop() const {
  if (!listener) co_return;
  auto closing = [](std::shared_ptr<InsideListener> l) -> asio::awaitable<void> {
    l->Close();
    co_return;
  };
  co_await asio::co_spawn(listener->executor(), closing(listener), asio::use_awaitable);
  auto ending = [](std::shared_ptr<EgressProxy> p) -> asio::awaitable<void> {
    p->CloseAll();
    co_return;
  };
  co_await asio::co_spawn(proxy->executor(), ending(proxy), asio::use_awaitable);
}

asio::awaitable<EgressReport> SandboxEgress::Report() const {
  auto reading = [](std::shared_ptr<EgressProxy> p) -> asio::awaitable<EgressReport> {
    co_return p->report();
  };
  co_return co_await asio::co_spawn(proxy->executor(), reading(proxy), asio::use_awaitable);
}

asio::awaitable<void> SandboxEgress::SetPolicy(EgressPolicy policy) const {
  auto setting = [](std::shared_ptr<EgressProxy> p, EgressPolicy next) -> asio::awaitable<void> {
    p->SetPolicy(std::move(next));
    co_return;
  };
  co_await asio::co_spawn(proxy->executor(), setting(proxy, std::move(policy)),
                          asio::use_awaitable);
}

asio::awaitable<Result<SandboxEgress>> StartEgress(Sandbox& sandbox, const EgressPolicy& policy,
                                                   const EgressShared& shared) {
  if (!shared.error.empty()) co_return Status::Error(shared.error);
  if (!shared.thread) co_return Status::Error("egress is not configured (EGRESS_ALLOW_MAX)");
  const asio::any_io_executor ex = shared.thread->executor();
  Result<std::shared_ptr<InsideListener>> listener = co_await sandbox.ListenInside(kEgressPort, ex);
  if (!listener.ok()) co_return listener.status();
  SandboxEgress out;
  out.listener = std::move(listener).value();
  EgressProxyOptions options;
  options.policy = policy;
  options.hosts = shared.hosts;
  options.secrets = shared.secrets;
  options.interception = shared.interception;
  options.counters = shared.counters;
  options.max_connections = shared.max_connections;
  options.bytes_per_second = shared.bytes_per_second;
  out.proxy = std::make_shared<EgressProxy>(ex, std::move(options));
  // The accept loop holds the listener until Stop closes it.
  asio::co_spawn(
      ex,
      [proxy = out.proxy, listener = out.listener]() -> asio::awaitable<void> {
        co_await proxy->Accept(listener);
      },
      asio::detached);
  co_return out;
}

}  // namespace ci::daemon
