#include "daemon/service/sandbox_egress.h"

#include <unistd.h>

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

void SandboxEgress::Stop() {
  if (!acceptor) return;
  boost::system::error_code ec;
  acceptor->close(ec);
  proxy->CloseAll();
}

asio::awaitable<Result<SandboxEgress>> StartEgress(
    Sandbox& sandbox, const EgressPolicy& policy,
    const std::map<std::string, std::vector<asio::ip::address>>& hosts) {
  Result<int> fd = co_await sandbox.ListenInside(kEgressPort);
  if (!fd.ok()) co_return fd.status();
  auto ex = co_await asio::this_coro::executor;
  SandboxEgress out;
  out.acceptor = std::make_shared<asio::ip::tcp::acceptor>(ex);
  boost::system::error_code ec;
  out.acceptor->assign(asio::ip::tcp::v4(), *fd, ec);
  if (ec) {
    ::close(*fd);
    co_return Status::Error("egress socket: " + ec.message());
  }
  EgressProxyOptions options;
  options.policy = policy;
  options.hosts = hosts;
  out.proxy = std::make_shared<EgressProxy>(ex, std::move(options));
  // The accept loop holds the acceptor until Stop closes it.
  asio::co_spawn(
      ex,
      [proxy = out.proxy, acceptor = out.acceptor]() -> asio::awaitable<void> {
        co_await proxy->Accept(*acceptor);
      },
      asio::detached);
  co_return out;
}

}  // namespace ci::daemon
