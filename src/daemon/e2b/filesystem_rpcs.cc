#include "daemon/e2b/filesystem_rpcs.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <csignal>

#include "core/json.h"
#include "daemon/e2b/connect_rpc.h"
#include "daemon/e2b/process_requests.h"
#include "daemon/e2b/proto_json.h"

namespace ci::daemon::e2b {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

constexpr std::string_view kService = "/filesystem.Filesystem/";

// A request's path fields, checked: argv cannot carry a NUL.
Result<std::string> PathField(const rapidjson::Value& doc, const char* name) {
  std::string path;
  if (Status s = StringField(doc, name, "the message", &path); !s.ok()) return s;
  if (path.find('\0') != std::string::npos) {
    return Status::Error(std::string(name) + " holds a NUL byte");
  }
  return path;
}

// What the helper is asked for this unary call: envd_files.py's operation and arguments.
Result<std::vector<std::string>> HelperArgs(std::string_view method, std::string_view message) {
  auto doc = ParseJsonObject(message, "the message");
  if (!doc.ok()) return doc.status();
  if (method == "Move") {
    auto source = PathField(*doc, "source");
    if (!source.ok()) return source.status();
    auto destination = PathField(*doc, "destination");
    if (!destination.ok()) return destination.status();
    if (source->empty() || destination->empty()) {
      return Status::Error("source and destination are required");
    }
    return std::vector<std::string>{"move", *source, *destination};
  }
  auto path = PathField(*doc, "path");
  if (!path.ok()) return path.status();
  if (method == "ListDir") {
    uint32_t depth = 1;
    if (const rapidjson::Value* d = Member(*doc, "depth")) {
      auto n = Uint32Field(*d, "depth");
      if (!n.ok()) return n.status();
      depth = std::max<uint32_t>(*n, 1);
    }
    return std::vector<std::string>{"list", *path, std::to_string(depth)};
  }
  if (method == "Stat") return std::vector<std::string>{"stat", *path};
  if (method == "MakeDir") return std::vector<std::string>{"mkdir", *path};
  if (method == "Remove") return std::vector<std::string>{"remove", *path};
  return Status::Error("filesystem.Filesystem/" + std::string(method) +
                       " is not a method this server offers");
}

// A helper's error as Connect's: a full disk is resource_exhausted.
RpcError AsConnect(RpcError e) {
  if (e.code == kNoSpace) e.code = "resource_exhausted";
  return e;
}

asio::awaitable<void> Unary(HttpExchange& ex, std::string_view method, const FileContext& c,
                            std::string_view message) {
  static constexpr std::string_view kWatchers[] = {"CreateWatcher", "GetWatcherEvents",
                                                   "RemoveWatcher"};
  if (std::find(std::begin(kWatchers), std::end(kWatchers), method) != std::end(kWatchers)) {
    co_return co_await ex.Respond(ConnectError(
        "unimplemented", "polled watchers are not offered by this server: use WatchDir"));
  }
  auto args = HelperArgs(method, message);
  if (!args.ok()) {
    const bool known = method == "Stat" || method == "ListDir" || method == "MakeDir" ||
                       method == "Move" || method == "Remove";
    const std::string code = known ? "invalid_argument" : "unimplemented";
    co_return co_await ex.Respond(ConnectError(code, args.status().message()));
  }
  auto answer = co_await RunFileHelper(c, std::move(*args));
  if (auto* e = std::get_if<RpcError>(&answer)) {
    const RpcError connect = AsConnect(*e);
    co_return co_await ex.Respond(ConnectError(connect.code, connect.message));
  }
  co_await ex.Respond(JsonResponse(200, std::move(std::get<std::string>(answer))));
}

// The helper's event lines as WatchDir's messages: {} is a keepalive.
std::string WatchMessage(std::string_view line) {
  if (line == "{}") return R"({"keepalive":{}})";
  return "{\"filesystem\":" + std::string(line) + "}";
}

// WatchDir: the helper's first line decides between the stream and an error; then each line is
// a message, written before the next is read (a client that does not read holds the helper).
asio::awaitable<void> Watch(HttpExchange& ex, const FileContext& c, std::string_view message) {
  auto doc = ParseJsonObject(message, "the message");
  Result<std::string> path = doc.ok() ? PathField(*doc, "path") : Result<std::string>(doc.status());
  bool recursive = false;
  if (path.ok()) {
    if (Status s = BoolField(*doc, "recursive", "the message", &recursive); !s.ok()) path = s;
  }
  if (!path.ok()) {
    co_return co_await ex.Respond(ConnectStreamError("invalid_argument", path.status().message()));
  }
  const auto keepalive = KeepaliveInterval(ex.head());
  std::vector<std::string> args = {"watch", *path, recursive ? "1" : "0",
                                   std::to_string(keepalive.count())};
  auto started = co_await StartFileHelper(c, std::move(args), false);
  if (auto* e = std::get_if<RpcError>(&started)) {
    co_return co_await ex.Respond(ConnectStreamError(e->code, e->message));
  }
  std::unique_ptr<SandboxProcess> helper = std::move(std::get<0>(started));
  const uint32_t pid = helper->pid();
  struct State {
    std::string pending;
    bool began = false, failed = false, gone = false, expired = false, ended = false;
    std::optional<RpcError> refused;
  };
  auto st = std::make_shared<State>();
  // Kills the helper: the client left, or the call's deadline passed.
  auto stop = [sessions = c.sessions, sandbox = c.sandbox, client = c.client,
               pid]() -> asio::awaitable<void> {
    (void)co_await sessions->Signal(sandbox, client, pid, SIGKILL);
  };
  asio::steady_timer deadline(co_await asio::this_coro::executor);
  ProcessOutputSink sink = [&](StreamKind kind, std::string data) -> asio::awaitable<void> {
    if (kind != StreamKind::kStdout || st->failed || st->gone) co_return;
    st->pending += data;
    size_t eol;
    while ((eol = st->pending.find('\n')) != std::string::npos && !st->failed) {
      const std::string line = st->pending.substr(0, eol);
      st->pending.erase(0, eol + 1);
      std::string batch;
      if (!st->began) {
        auto answer = ParseFileAnswer(line);
        if (auto* e = std::get_if<RpcError>(&answer)) {
          st->refused = AsConnect(*e);
          st->failed = true;
          break;
        }
        HeaderList headers = {{"Content-Type", "application/connect+json"}};
        Status began = co_await ex.BeginStream(200, std::move(headers));
        st->began = true;
        if (!began.ok()) {
          st->gone = true;
          break;
        }
        ex.WatchClient([st, &deadline] {
          st->gone = true;
          deadline.cancel();
        });
        batch = Envelope(R"({"start":{}})");
      } else {
        batch = Envelope(WatchMessage(line));
      }
      Status written = co_await ex.WriteStream(std::move(batch));
      if (!written.ok()) st->gone = true;
    }
    if (st->failed || st->gone) co_await stop();
  };
  // The deadline (Connect-Timeout-Ms, the SDK's timeoutMs) and the client's leaving end it.
  const std::chrono::milliseconds lifetime = ConnectTimeout(ex.head());
  deadline.expires_after(lifetime.count() > 0 ? lifetime : std::chrono::hours(24 * 365));
  asio::co_spawn(
      deadline.get_executor(),
      [&deadline, st, stop]() -> asio::awaitable<void> {
        boost::system::error_code ec;
        co_await deadline.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (st->ended) co_return;  // Watch returned: nothing here is to be touched
        st->expired = !ec;
        co_await stop();
      },
      asio::detached);
  ProcessEnd end = co_await helper->Wait(std::move(sink));
  st->ended = true;
  deadline.cancel();
  if (!st->began) {
    RpcError e = st->refused.value_or(RpcError{
        "internal",
        "watching ended before it began" + (end.error.empty() ? std::string() : ": " + end.error)});
    co_return co_await ex.Respond(ConnectStreamError(e.code, e.message));
  }
  co_await ex.UnwatchClient();
  if (st->gone) co_return;
  std::string last = st->expired ? EndOfStream("deadline_exceeded", "the watch's timeout passed")
                                 : EndOfStream("internal", "watching the directory ended");
  if ((co_await ex.WriteStream(std::move(last))).ok()) co_await ex.EndStream();
}

}  // namespace

bool IsFilesystemRpc(std::string_view path) { return path.starts_with(kService); }

bool IsStreamingFilesystemRpc(std::string_view path) {
  return path == "/filesystem.Filesystem/WatchDir";
}

asio::awaitable<void> HandleFilesystemRpc(HttpExchange& ex, const FileContext& context,
                                          uint64_t max_body_bytes) {
  const std::string path = ex.head().path;
  const std::string_view method = std::string_view(path).substr(kService.size());
  const bool streaming = IsStreamingFilesystemRpc(path);
  if (ex.head().method != "POST") {
    co_return co_await ex.Respond(ConnectError("unimplemented", "Connect's RPCs are POSTs"));
  }
  if (auto refused = RefusedUser(ex.head().Header("authorization"))) {
    HttpResponse r = ConnectError(refused->code, refused->message);
    if (streaming) r = ConnectStreamError(refused->code, refused->message);
    co_return co_await ex.Respond(std::move(r));
  }
  BodyChunk body = co_await ReadWholeBody(ex, max_body_bytes);
  if (body.error == BodyError::kClientGone) co_return;
  if (body.error != BodyError::kNone) {
    const bool large = body.error == BodyError::kTooLarge;
    const std::string code = large ? "resource_exhausted" : "invalid_argument";
    const std::string why =
        large ? "the request is larger than " + std::to_string(max_body_bytes >> 20) + " MiB"
              : "the request's body could not be read";
    HttpResponse r = ConnectError(code, why);
    if (streaming) r = ConnectStreamError(code, why);
    co_return co_await ex.Respond(std::move(r));
  }
  if (!streaming) co_return co_await Unary(ex, method, context, body.data);
  std::string why;
  std::optional<std::string> message = UnwrapEnvelope(body.data, &why);
  if (!message) co_return co_await ex.Respond(ConnectStreamError("invalid_argument", why));
  co_await Watch(ex, context, *message);
}

}  // namespace ci::daemon::e2b
