#include "daemon/e2b/process_rpcs.h"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdlib>

#include "core/json.h"
#include "daemon/e2b/connect_rpc.h"
#include "daemon/e2b/process_requests.h"

namespace ci::daemon::e2b {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

constexpr std::string_view kService = "/process.Process/";

std::vector<std::string> WithEnvs(std::vector<std::string> env,
                                  const std::map<std::string, std::string>& envs) {
  for (const auto& [key, value] : envs) {
    const std::string prefix = key + "=";
    std::erase_if(env, [&](const std::string& e) { return e.starts_with(prefix); });
    env.push_back(prefix + value);
  }
  return env;
}

// Sends the watcher's events as they come until the process's end (or the client leaves, or
// falls too far behind), with a keepalive after each quiet period.
asio::awaitable<void> StreamEvents(HttpExchange& ex, ProcessTable& table, WatcherPtr w,
                                   std::chrono::seconds keepalive) {
  HeaderList headers = {{"Content-Type", "application/connect+json"}};
  Status began = co_await ex.BeginStream(200, std::move(headers));
  auto gone = std::make_shared<bool>(!began.ok());
  if (!*gone) {
    ex.WatchClient([gone, w] {
      *gone = true;
      w->wake.cancel();
    });
  }
  while (!*gone) {
    std::string batch;
    while (!w->events.empty()) {
      w->bytes -= w->events.front().size();
      batch += Envelope(w->events.front());
      w->events.pop_front();
    }
    const bool last = w->dropped || (w->ended && w->events.empty());
    if (w->dropped) batch += EndOfStream(w->dropped->code, w->dropped->message);
    if (last && !w->dropped) batch += EndOfStream();
    if (!batch.empty() && !(co_await ex.WriteStream(std::move(batch))).ok()) *gone = true;
    if (last || *gone) break;
    // What was queued while the batch was written (its wake-up found no wait) goes at once.
    if (!w->events.empty() || w->ended || w->dropped) continue;
    boost::system::error_code ec;
    w->wake.expires_after(keepalive);
    co_await w->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (!ec && w->events.empty() && !w->ended && !w->dropped) {
      w->events.push_back(ProcessTable::KeepaliveEvent());
      w->bytes += w->events.back().size();
    }
  }
  if (began.ok()) co_await ex.UnwatchClient();
  table.Unwatch(w);
  if (!*gone) co_await ex.EndStream();
}

asio::awaitable<void> Start(HttpExchange& ex, const ProcessContext& c, ProcessTable& table,
                            std::string_view message) {
  auto req = ParseStartRequest(message);
  if (!req.ok()) {
    co_return co_await ex.Respond(ConnectStreamError("invalid_argument", req.status().message()));
  }
  if (req->pty) {
    co_return co_await ex.Respond(ConnectStreamError(
        "unimplemented", "PTYs are not offered by this server: start the process without pty"));
  }
  if (auto refused = RefusedUser(ex.head().Header("authorization"))) {
    co_return co_await ex.Respond(ConnectStreamError(refused->code, refused->message));
  }
  ProcessSpec spec;
  spec.argv.push_back(req->config.cmd);
  spec.argv.insert(spec.argv.end(), req->config.args.begin(), req->config.args.end());
  spec.env = WithEnvs(c.env, req->config.envs);
  const std::string cwd = req->config.cwd.value_or("");
  spec.cwd = cwd.empty() ? c.home : cwd.starts_with('/') ? cwd : c.home + "/" + cwd;
  spec.env.push_back("PWD=" + spec.cwd);
  spec.stdin = req->stdin;
  auto started = co_await table.Start(c.sandbox, c.client, std::move(spec), std::move(req->config),
                                      std::move(req->tag), ConnectTimeout(ex.head()));
  if (auto* e = std::get_if<RpcError>(&started)) {
    co_return co_await ex.Respond(ConnectStreamError(e->code, e->message));
  }
  co_await StreamEvents(ex, table, std::get<WatcherPtr>(started), KeepaliveInterval(ex.head()));
}

asio::awaitable<void> Connect(HttpExchange& ex, const ProcessContext& c, ProcessTable& table,
                              std::string_view message) {
  auto which = ParseSelectorRequest(message);
  if (!which.ok()) {
    co_return co_await ex.Respond(ConnectStreamError("invalid_argument", which.status().message()));
  }
  auto watched = table.Connect(c.sandbox, *which);
  if (auto* e = std::get_if<RpcError>(&watched)) {
    co_return co_await ex.Respond(ConnectStreamError(e->code, e->message));
  }
  co_await StreamEvents(ex, table, std::get<WatcherPtr>(watched), KeepaliveInterval(ex.head()));
}

std::string ListJson(const std::vector<ProcessInfo>& processes) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    w.Key("processes");
    w.StartArray();
    for (const ProcessInfo& p : processes) {
      w.StartObject();
      w.Key("config");
      w.StartObject();
      WriteField(w, "cmd", p.config.cmd);
      w.Key("args");
      w.StartArray();
      for (const std::string& a : p.config.args) w.String(a.data(), a.size());
      w.EndArray();
      w.Key("envs");
      w.StartObject();
      for (const auto& [k, v] : p.config.envs) WriteField(w, k, v);
      w.EndObject();
      if (p.config.cwd) WriteField(w, "cwd", *p.config.cwd);
      w.EndObject();
      w.Key("pid");
      w.Uint(p.pid);
      if (p.tag) WriteField(w, "tag", *p.tag);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  });
}

HttpResponse Done(const std::optional<RpcError>& e) {
  return e ? ConnectError(e->code, e->message) : JsonResponse(200, "{}");
}

asio::awaitable<void> Unary(HttpExchange& ex, std::string_view method, const ProcessContext& c,
                            ProcessTable& table, std::string_view message) {
  if (method == "List") {
    if (Status s = CheckListRequest(message); !s.ok()) {
      co_return co_await ex.Respond(ConnectError("invalid_argument", s.message()));
    }
    co_return co_await ex.Respond(JsonResponse(200, ListJson(table.List(c.sandbox))));
  }
  if (method == "SendInput") {
    auto req = ParseInputRequest(message);
    if (!req.ok()) {
      co_return co_await ex.Respond(ConnectError("invalid_argument", req.status().message()));
    }
    if (req->pty) {
      co_return co_await ex.Respond(
          ConnectError("unimplemented", "PTYs are not offered by this server"));
    }
    auto failed = co_await table.SendInput(c.sandbox, req->which, std::move(req->bytes));
    co_return co_await ex.Respond(Done(failed));
  }
  if (method == "CloseStdin") {
    auto which = ParseSelectorRequest(message);
    if (!which.ok()) {
      co_return co_await ex.Respond(ConnectError("invalid_argument", which.status().message()));
    }
    co_return co_await ex.Respond(Done(table.CloseStdin(c.sandbox, *which)));
  }
  if (method == "SendSignal") {
    auto req = ParseSignalRequest(message);
    if (!req.ok()) {
      co_return co_await ex.Respond(ConnectError("invalid_argument", req.status().message()));
    }
    auto failed = co_await table.Signal(c.sandbox, c.client, req->which, req->signal);
    co_return co_await ex.Respond(Done(failed));
  }
  if (method == "Update") {
    co_return co_await ex.Respond(
        ConnectError("unimplemented", "PTYs are not offered by this server: nothing to resize"));
  }
  if (method == "StreamInput") {
    co_return co_await ex.Respond(ConnectError(
        "unimplemented", "StreamInput (client streaming) is not offered: use SendInput"));
  }
  co_await ex.Respond(ConnectError(
      "unimplemented", "process.Process/" + std::string(method) + " is not a method of envd's"));
}

}  // namespace

bool IsProcessRpc(std::string_view path) { return path.starts_with(kService); }

bool IsStreamingProcessRpc(std::string_view path) {
  return path == "/process.Process/Start" || path == "/process.Process/Connect";
}

asio::awaitable<void> HandleProcessRpc(HttpExchange& ex, const ProcessContext& context,
                                       ProcessTable& table) {
  const std::string path = ex.head().path;
  const std::string_view method = std::string_view(path).substr(kService.size());
  const bool streaming = IsStreamingProcessRpc(path);
  if (ex.head().method != "POST") {
    co_return co_await ex.Respond(ConnectError("unimplemented", "Connect's RPCs are POSTs"));
  }
  BodyChunk body = co_await ReadWholeBody(ex, context.max_body_bytes);
  if (body.error != BodyError::kNone) {
    if (body.error == BodyError::kClientGone) co_return;
    const std::string why =
        body.error == BodyError::kTooLarge
            ? "the request is larger than " + std::to_string(context.max_body_bytes >> 20) + " MiB"
            : std::string("the request's body could not be read");
    const std::string code =
        body.error == BodyError::kTooLarge ? "resource_exhausted" : "invalid_argument";
    HttpResponse refusal = ConnectError(code, why);
    if (streaming) refusal = ConnectStreamError(code, why);
    co_return co_await ex.Respond(std::move(refusal));
  }
  if (!streaming) co_return co_await Unary(ex, method, context, table, body.data);
  std::string why;
  std::optional<std::string> message = UnwrapEnvelope(body.data, &why);
  if (!message) co_return co_await ex.Respond(ConnectStreamError("invalid_argument", why));
  if (method == "Start") co_return co_await Start(ex, context, table, *message);
  co_await Connect(ex, context, table, *message);
}

}  // namespace ci::daemon::e2b
