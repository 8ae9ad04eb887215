#include "daemon/egress/egress_proxy.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <optional>

#include "core/header_text.h"
#include "core/tls_peer.h"
#include "daemon/egress/chunked_decoder.h"
#include "daemon/egress/egress_interception.h"
#include "daemon/egress/egress_pacer.h"
#include "daemon/egress/egress_secrets.h"
#include "daemon/egress/prefixed_stream.h"
#include "daemon/egress/proxy_messages.h"
#include "daemon/egress/secret_redactor.h"
#include "daemon/egress/tls_client_hello.h"

namespace ci::daemon {

namespace asio = boost::asio;
using asio::ip::tcp;
using Stream = InsideListener::Stream;
using boost::system::error_code;

// Where a request goes: the host as the client named it (a name, or an address literal without
// brackets) and the port.
struct EgressProxy::Target {
  std::string host;
  uint16_t port = 0;
};

namespace {

// Keeps a socket in the proxy's set while it is open, for CloseAll.
struct Tracked {
  std::set<Stream*>& set;
  Stream* socket;
  Tracked(std::set<Stream*>& s, Stream& sock) : set(s), socket(&sock) { set.insert(socket); }
  ~Tracked() { set.erase(socket); }
};

auto Ignore(error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }

// Sends one request (its head, then exactly its body's bytes) and passes the answer back to its
// end, every value in `values` masked; the reason when the answer could not be passed safely
// (then nothing of it was sent). Counts what crossed into `counts`.
template <typename Client, typename Upstream>
asio::awaitable<std::string> Exchange(Client& client, Upstream& upstream, std::string head,
                                      std::string buffered, uint64_t body_bytes,
                                      std::vector<std::string> values, EgressDestination& counts,
                                      EgressPacer* pacer) {
  if (buffered.size() > body_bytes) buffered.resize(body_bytes);
  head += buffered;
  error_code ec;
  co_await asio::async_write(upstream, asio::buffer(head), Ignore(ec));
  if (ec) co_return std::string();
  counts.bytes_out += head.size();
  uint64_t left = body_bytes - buffered.size();
  char chunk[65536];
  while (left > 0) {
    size_t n = co_await client.async_read_some(
        asio::buffer(chunk, std::min<uint64_t>(left, sizeof chunk)), Ignore(ec));
    if (ec) co_return std::string();
    co_await asio::async_write(upstream, asio::buffer(chunk, n), Ignore(ec));
    if (ec) co_return std::string();
    left -= n;
    counts.bytes_out += n;
    if (pacer != nullptr) co_await pacer->Take(n);
  }
  SecretRedactor redactor(std::move(values));
  std::string pending;  // the answer's bytes before the end of its final head
  bool in_body = redactor.empty();
  std::optional<ChunkedDecoder> chunked;
  // Body bytes passed on (decoded, masked) into `out`; false once the body has ended.
  auto body = [&](std::string_view bytes, std::string* out) {
    if (!chunked) {
      *out += redactor.Feed(bytes);
      return true;
    }
    std::string plain;
    const bool ok = chunked->Feed(bytes, &plain);
    *out += redactor.Feed(plain);
    return ok && !chunked->done();
  };
  bool more = true;
  while (more) {
    size_t n = co_await upstream.async_read_some(asio::buffer(chunk), Ignore(ec));
    if (ec) break;
    counts.bytes_in += n;
    if (pacer != nullptr) co_await pacer->Take(n);
    std::string out;
    if (in_body) {
      more = body(std::string_view(chunk, n), &out);
    } else {
      pending.append(chunk, n);
      // Interim (1xx) heads pass; the final one starts the body.
      for (size_t end = pending.find("\r\n\r\n"); !in_body && end != std::string::npos;
           end = pending.find("\r\n\r\n")) {
        AnswerHead answer = ReadAnswerHead(std::string_view(pending).substr(0, end + 4));
        if (!answer.problem.empty()) co_return answer.problem;
        out += redactor.Feed(answer.text);
        pending.erase(0, end + 4);
        if (!answer.interim) {
          in_body = true;
          if (answer.chunked) chunked.emplace();
        }
      }
      if (!in_body && pending.size() > 64 * 1024) co_return "the answer's head is over 64 KiB";
      if (in_body) more = body(pending, &out);
      if (in_body) pending.clear();
    }
    co_await asio::async_write(client, asio::buffer(out), Ignore(ec));
    if (ec) co_return std::string();
  }
  const std::string last = redactor.Finish();
  co_await asio::async_write(client, asio::buffer(last), Ignore(ec));
  co_return std::string();
}

}  // namespace

struct EgressProxy::Request {
  Head head;
  std::string path;       // origin form, as it goes out
  std::string authority;  // the Host header it goes out with
  uint64_t body = 0;      // bytes (Content-Length)
};

EgressProxy::EgressProxy(asio::any_io_executor ex, EgressProxyOptions options)
    : ex_(std::move(ex)), options_(std::move(options)) {
  if (options_.bytes_per_second > 0) {
    pacer_ = std::make_unique<EgressPacer>(ex_, options_.bytes_per_second);
  }
}

EgressReport EgressProxy::report() const {
  EgressReport out;
  for (const auto& [key, d] : reached_) out.reached.push_back(d);
  out.refused = refused_;
  out.refused_count = refused_count_;
  return out;
}

namespace {

// The listener's next connection, accepted on the listener's own executor.
asio::awaitable<std::optional<Stream>> NextConnection(std::shared_ptr<InsideListener> listener) {
  Result<Stream> client = co_await listener->Accept();
  if (!client.ok()) co_return std::nullopt;
  co_return std::move(client).value();
}

}  // namespace

asio::awaitable<void> EgressProxy::Accept(std::shared_ptr<InsideListener> listener) {
  auto self = shared_from_this();
  while (!closed_) {
    auto accepting = NextConnection(listener);
    std::optional<Stream> client =
        co_await asio::co_spawn(listener->executor(), std::move(accepting), asio::use_awaitable);
    if (!client) break;
    asio::co_spawn(ex_, self->Serve(std::move(*client)), asio::detached);
  }
}

asio::awaitable<void> EgressProxy::Serve(Stream client) {
  auto self = shared_from_this();
  Target target;
  if (open_ >= options_.max_connections) {
    co_await Refuse(client, target, 503,
                    "more than " + std::to_string(options_.max_connections) +
                        " connections at once through this sandbox's proxy");
    co_return;
  }
  if (closed_) co_return;
  ++open_;
  struct Closing {
    size_t& open;
    ~Closing() { --open; }
  } closing{open_};
  Tracked tracked(sockets_, client);
  // The head, read until its blank line; what came after it is kept for the destination.
  std::string buffered;
  size_t end = std::string::npos;
  while (end == std::string::npos && buffered.size() <= kMaxHead) {
    char chunk[4096];
    error_code ec;
    size_t n = co_await client.async_read_some(asio::buffer(chunk), Ignore(ec));
    if (ec) co_return;
    buffered.append(chunk, n);
    end = buffered.find("\r\n\r\n");
  }
  if (end == std::string::npos || end > kMaxHead) {
    co_return co_await Refuse(client, target, 431, "head too large");
  }
  Head head;
  if (!ParseHead(std::string_view(buffered).substr(0, end), &head)) {
    co_return co_await Refuse(client, target, 400, "not an HTTP/1 proxy request");
  }
  std::string rest = buffered.substr(end + 4);
  if (head.method == "CONNECT") {
    if (!ParseAuthority(head.target, 0, &target.host, &target.port) || target.port == 0) {
      co_return co_await Refuse(client, target, 400, "CONNECT needs host:port");
    }
    co_return co_await Tunnel(client, std::move(target), std::move(rest));
  }
  // A plain-HTTP request in absolute form: "http://host[:port]/path".
  constexpr std::string_view kHttp = "http://";
  if (AsciiLower(head.target).rfind(kHttp, 0) != 0) {
    co_return co_await Refuse(client, target, 400,
                              "only http:// URLs in absolute form and CONNECT are proxied");
  }
  std::string_view url = std::string_view(head.target).substr(kHttp.size());
  const size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  std::string path = slash == std::string_view::npos ? "/" : std::string(url.substr(slash));
  if (authority.find('@') != std::string_view::npos ||
      !ParseAuthority(authority, 80, &target.host, &target.port)) {
    co_return co_await Refuse(client, target, 400, "bad URL authority");
  }
  Request request{std::move(head), std::move(path), std::string(authority)};
  if (auto refusal = CheckRequest(request.head, target.host, target.port, 80, &request.body)) {
    co_return co_await Refuse(client, target, refusal->status, refusal->reason);
  }
  co_await Forward(client, std::move(target), std::move(request), std::move(rest));
}

asio::awaitable<std::vector<asio::ip::address>> EgressProxy::Resolve(const Target& target,
                                                                     std::string* why) {
  std::vector<asio::ip::address> out;
  if (!options_.policy.AllowsName(target.host, target.port)) {
    *why = "not allowed by this sandbox's egress policy (" + options_.policy.ToString() + ")";
    co_return out;
  }
  std::vector<asio::ip::address> found;
  error_code ec;
  const asio::ip::address literal = asio::ip::make_address(target.host, ec);
  if (!ec) {
    found.push_back(literal);
  } else if (auto it = options_.hosts.find(target.host); it != options_.hosts.end()) {
    found = it->second;
  } else {
    tcp::resolver resolver(ex_);
    auto results =
        co_await resolver.async_resolve(target.host, std::to_string(target.port), Ignore(ec));
    if (ec) {
      *why = "the name does not resolve (" + ec.message() + ")";
      co_return out;
    }
    for (const auto& r : results) found.push_back(r.endpoint().address());
  }
  for (const auto& a : found) {
    if (options_.policy.AllowsAddress(a, target.port)) out.push_back(a);
  }
  if (out.empty()) {
    *why = found.empty() ? "the name resolves to no address"
                         : "it resolves to " + found.front().to_string() +
                               ", an address this sandbox may not reach (private, loopback, "
                               "link-local or denied)";
  }
  co_return out;
}

asio::awaitable<bool> EgressProxy::Connect(Stream& upstream,
                                           const std::vector<asio::ip::address>& addresses,
                                           uint16_t port) {
  for (const auto& a : addresses) {
    asio::steady_timer deadline(ex_, options_.connect_timeout);
    deadline.async_wait([&](error_code e) {
      if (!e) upstream.close();
    });
    error_code ec;
    co_await upstream.async_connect(
        asio::generic::stream_protocol::endpoint(tcp::endpoint(a, port)), Ignore(ec));
    deadline.cancel();
    if (!ec) co_return true;
    upstream = Stream(ex_);
  }
  co_return false;
}

asio::awaitable<void> EgressProxy::Tunnel(Stream& client, Target target, std::string buffered) {
  std::string why;
  auto addresses = co_await Resolve(target, &why);
  if (addresses.empty()) co_return co_await Refuse(client, target, 403, why);
  error_code ec;
  co_await asio::async_write(
      client, asio::buffer(std::string_view("HTTP/1.1 200 Connection established\r\n\r\n")),
      Ignore(ec));
  if (ec) co_return;
  // The ClientHello, whose server name must be the CONNECT's host.
  ClientHello hello = ParseClientHello(buffered);
  while (hello.state == ClientHello::State::kNeedMore) {
    char chunk[4096];
    asio::steady_timer deadline(ex_, options_.connect_timeout);
    deadline.async_wait([&](error_code e) {
      if (!e) client.close();
    });
    size_t n = co_await client.async_read_some(asio::buffer(chunk), Ignore(ec));
    deadline.cancel();
    if (ec) co_return;
    buffered.append(chunk, n);
    hello = ParseClientHello(buffered);
  }
  error_code not_literal;
  asio::ip::make_address(target.host, not_literal);
  const bool literal = !not_literal;
  std::string refused;
  if (hello.state == ClientHello::State::kNotTls) {
    refused = "a tunnel carries TLS only (its first bytes are not a ClientHello)";
  } else if (!hello.server_name && !literal) {
    refused = "the ClientHello names no server (SNI) for " + target.host;
  } else if (hello.server_name && AsciiLower(*hello.server_name) != target.host) {
    refused = "the ClientHello names " + *hello.server_name + ", the CONNECT " + target.host;
  }
  if (refused.empty() && options_.interception &&
      options_.interception->Intercepts(target.host, target.port)) {
    co_return co_await Intercept(client, std::move(target), std::move(addresses),
                                 std::move(buffered));
  }
  const std::pair<std::string, uint16_t> destination(target.host, target.port);
  if (refused.empty() && options_.secrets && !secrets_not_added_.contains(destination) &&
      !options_.secrets->For(target.host, target.port).empty()) {
    // Never sent through a tunnel the proxy cannot read: the operator learns why.
    secrets_not_added_.insert(destination);
    spdlog::info(
        "egress: the secrets for {}:{} are not added: its tunnels are not intercepted (it is not "
        "in EGRESS_TLS_INTERCEPT)",
        target.host, target.port);
  }
  Stream upstream(ex_);
  Tracked tracked(sockets_, upstream);
  if (refused.empty() && !(co_await Connect(upstream, addresses, target.port))) {
    refused = "could not connect to " + target.host;
  }
  if (!refused.empty()) {  // past the 200: the tunnel is closed
    NoteRefusal(target, std::move(refused));
    client.close();
    co_return;
  }
  EgressDestination& counts = Reached(target);
  co_await asio::async_write(upstream, asio::buffer(buffered), Ignore(ec));
  if (ec) co_return;
  counts.bytes_out += buffered.size();
  co_await Splice(client, upstream, counts);
}

asio::awaitable<void> EgressProxy::Forward(Stream& client, Target target, Request request,
                                           std::string buffered) {
  std::string why;
  auto addresses = co_await Resolve(target, &why);
  if (addresses.empty()) co_return co_await Refuse(client, target, 403, why);
  Stream upstream(ex_);
  Tracked tracked(sockets_, upstream);
  if (!(co_await Connect(upstream, addresses, target.port))) {
    co_return co_await Refuse(client, target, 502, "could not connect to " + target.host);
  }
  std::vector<EgressSecret> secrets;
  if (options_.secrets) secrets = options_.secrets->For(target.host, target.port);
  std::vector<std::string> values;
  for (const EgressSecret& s : secrets) values.push_back(s.value);
  std::string head = OutgoingHead(request.head, request.path, request.authority, secrets);
  EgressDestination& counts = Reached(target);
  std::string problem = co_await Exchange(client, upstream, std::move(head), std::move(buffered),
                                          request.body, std::move(values), counts, pacer_.get());
  if (!problem.empty()) co_return co_await Refuse(client, target, 502, std::move(problem));
  error_code ec;
  client.shutdown(Stream::shutdown_both, ec);
}

asio::awaitable<void> EgressProxy::Intercept(Stream& client, Target target,
                                             std::vector<asio::ip::address> addresses,
                                             std::string buffered) {
  namespace ssl = asio::ssl;
  auto leaf = options_.interception->ca().ServerContext(target.host);
  if (!leaf.ok()) {
    NoteRefusal(target, leaf.status().message());
    client.close();
    co_return;
  }
  std::shared_ptr<ssl::context> leaf_context = std::move(leaf).value();
  // The ClientHello already read goes to OpenSSL first.
  ssl::stream<PrefixedStream<Stream>> tls(PrefixedStream<Stream>(client, std::move(buffered)),
                                          *leaf_context);
  error_code ec;
  asio::steady_timer deadline(ex_, options_.connect_timeout);
  deadline.async_wait([&](error_code e) {
    if (!e) client.close();
  });
  co_await tls.async_handshake(ssl::stream_base::server, Ignore(ec));
  deadline.cancel();
  if (ec) {
    NoteRefusal(target, "the sandbox's TLS handshake with the proxy failed (" + ec.message() +
                            "); does it trust the daemon's CA?");
    client.close();
    co_return;
  }
  // One request's head, decrypted.
  std::string got;
  size_t end = std::string::npos;
  while (end == std::string::npos && got.size() <= kMaxHead) {
    char chunk[4096];
    size_t n = co_await tls.async_read_some(asio::buffer(chunk), Ignore(ec));
    if (ec) co_return;
    got.append(chunk, n);
    end = got.find("\r\n\r\n");
  }
  std::optional<Refusal> refusal;
  Head head;
  uint64_t body = 0;
  if (end == std::string::npos || end > kMaxHead) {
    refusal = Refusal{431, "head too large"};
  } else if (!ParseHead(std::string_view(got).substr(0, end), &head) || head.method == "CONNECT") {
    refusal = Refusal{400, "not an HTTP/1 request"};
  } else if (!head.target.starts_with('/')) {
    refusal = Refusal{400, "a request in an intercepted tunnel is in origin form (/path)"};
  } else {
    refusal = CheckRequest(head, target.host, target.port, 443, &body);
  }
  ssl::stream<Stream> upstream(ex_, options_.interception->upstream());
  Tracked tracked(sockets_, upstream.next_layer());
  if (!refusal) {
    const bool connected = co_await Connect(upstream.next_layer(), addresses, target.port);
    if (!connected) refusal = Refusal{502, "could not connect to " + target.host};
  }
  if (!refusal && !SetTlsPeer(upstream.native_handle(), target.host, /*verify=*/true)) {
    refusal = Refusal{502, "OpenSSL refuses the name " + target.host};
  }
  if (!refusal) {
    asio::steady_timer handshake_deadline(ex_, options_.connect_timeout);
    handshake_deadline.async_wait([&](error_code e) {
      if (!e) upstream.next_layer().close();
    });
    co_await upstream.async_handshake(ssl::stream_base::client, Ignore(ec));
    handshake_deadline.cancel();
    const long verified = SSL_get_verify_result(upstream.native_handle());
    if (verified != X509_V_OK) {
      refusal = Refusal{502, "the certificate of " + target.host + " does not verify (" +
                                 X509_verify_cert_error_string(verified) + ")"};
    } else if (ec) {
      refusal =
          Refusal{502, "the TLS handshake with " + target.host + " failed (" + ec.message() + ")"};
    }
  }
  std::string problem;
  if (!refusal) {
    std::vector<EgressSecret> secrets;
    if (options_.secrets) secrets = options_.secrets->For(target.host, target.port);
    std::vector<std::string> values;
    for (const EgressSecret& s : secrets) values.push_back(s.value);
    const std::string authority =
        target.port == 443 ? target.host : target.host + ":" + std::to_string(target.port);
    std::string out = OutgoingHead(head, head.target, authority, secrets);
    std::string rest = got.substr(end + 4);
    EgressDestination& counts = Reached(target);
    problem = co_await Exchange(tls, upstream, std::move(out), std::move(rest), body,
                                std::move(values), counts, pacer_.get());
  }
  if (!problem.empty()) refusal = Refusal{502, std::move(problem)};
  if (refusal) {
    NoteRefusal(target, refusal->reason);
    std::string text = RefusalText(refusal->status, refusal->reason);
    co_await asio::async_write(tls, asio::buffer(text), Ignore(ec));
  }
  // close_notify to the sandbox, waiting a bounded time for its own.
  asio::steady_timer closing(ex_, options_.connect_timeout);
  closing.async_wait([&](error_code e) {
    if (!e) client.close();
  });
  co_await tls.async_shutdown(Ignore(ec));
  closing.cancel();
  client.shutdown(Stream::shutdown_both, ec);
}

asio::awaitable<void> EgressProxy::Splice(Stream& client, Stream& upstream,
                                          EgressDestination& counts) {
  // Both directions at once: the one spawned here signals the timer when it ends.
  bool done = false;
  asio::steady_timer finished(ex_, asio::steady_timer::time_point::max());
  auto copy = [pacer = pacer_.get()](Stream& from, Stream& to,
                                     uint64_t& bytes) -> asio::awaitable<void> {
    char chunk[65536];
    error_code ec;
    while (true) {
      size_t n = co_await from.async_read_some(asio::buffer(chunk), Ignore(ec));
      if (ec) break;
      co_await asio::async_write(to, asio::buffer(chunk, n), Ignore(ec));
      if (ec) break;
      bytes += n;
      if (pacer != nullptr) co_await pacer->Take(n);
    }
    to.shutdown(Stream::shutdown_send, ec);
  };
  asio::co_spawn(ex_, copy(upstream, client, counts.bytes_in), [&](std::exception_ptr) {
    done = true;
    finished.cancel();
  });
  co_await copy(client, upstream, counts.bytes_out);
  if (!done) {
    error_code ec;
    co_await finished.async_wait(Ignore(ec));
  }
}

asio::awaitable<void> EgressProxy::Refuse(Stream& client, const Target& target, int status,
                                          std::string reason) {
  NoteRefusal(target, reason);
  std::string response = RefusalText(status, reason);
  error_code ec;
  co_await asio::async_write(client, asio::buffer(response), Ignore(ec));
  client.shutdown(Stream::shutdown_both, ec);
}

void EgressProxy::CloseAll() {
  closed_ = true;
  for (Stream* s : sockets_) {
    error_code ec;
    s->close(ec);
  }
}

void EgressProxy::NoteRefusal(const Target& target, std::string reason) {
  spdlog::info("egress refused {}:{}: {}", target.host.empty() ? "?" : target.host, target.port,
               reason);
  ++refused_count_;
  if (options_.counters) ++options_.counters->refused;
  if (refused_.size() < kMaxRefusals) {
    refused_.push_back({target.host, target.port, std::move(reason)});
  }
}

EgressDestination& EgressProxy::Reached(const Target& target) {
  EgressDestination& d = reached_[{target.host, target.port}];
  d.host = target.host;
  d.port = target.port;
  ++d.connections;
  if (options_.counters) ++options_.counters->allowed;
  return d;
}

}  // namespace ci::daemon
