#include "daemon/e2b/sandbox_plane.h"

#include "core/json.h"

namespace ci::daemon::e2b {
namespace {

// Connect's error shape, which envd's RPC clients read ({"code": "<name>", "message"}).
HttpResponse ConnectError(int status, std::string_view code, std::string_view message) {
  return JsonResponse(status, JsonText([&](JsonWriter& w) {
                        w.StartObject();
                        WriteField(w, "code", code);
                        WriteField(w, "message", message);
                        w.EndObject();
                      }));
}

// Server-streaming RPCs carry their error in the stream's end (Connect's EndStreamResponse,
// flags 0x02), under 200: a status alone reaches the SDK without the message.
bool IsStreamingRpc(std::string_view path) {
  return path == "/process.Process/Start" || path == "/process.Process/Connect" ||
         path == "/filesystem.Filesystem/WatchDir";
}

HttpResponse ConnectStreamError(std::string_view code, std::string_view message) {
  const std::string json = JsonText([&](JsonWriter& w) {
    w.StartObject();
    w.Key("error");
    w.StartObject();
    WriteField(w, "code", code);
    WriteField(w, "message", message);
    w.EndObject();
    w.EndObject();
  });
  HttpResponse r;
  r.content_type = "application/connect+json";
  r.body.push_back('\x02');
  for (int shift = 24; shift >= 0; shift -= 8) {
    r.body.push_back(static_cast<char>((json.size() >> shift) & 0xff));
  }
  r.body += json;
  return r;
}

bool IsRpc(std::string_view path) {
  return path.starts_with("/process.Process/") || path.starts_with("/filesystem.Filesystem/");
}

}  // namespace

bool IsSandboxPlane(const HttpRequestHead& head) {
  return head.Header("e2b-sandbox-id").has_value();
}

boost::asio::awaitable<void> HandleSandboxPlane(HttpExchange& ex, ControlPlane& control) {
  const HttpRequestHead& head = ex.head();
  const std::string id(head.Header("e2b-sandbox-id").value_or(""));
  const std::string_view token =
      head.Header("x-access-token").value_or(head.Header("e2b-traffic-access-token").value_or(""));
  const ControlPlane::Sandbox* s = co_await control.FindByToken(id, token);
  const bool health = head.path == "/health" && head.method == "GET";
  if (s == nullptr) {
    // The SDK reads 502 from /health as "not running"; elsewhere the sandbox is not found (an
    // unknown id and a wrong token answer the same, so neither can be probed for).
    const std::string message = "sandbox '" + id + "' not found, or the access token is not its";
    if (health) co_return co_await ex.Respond(ErrorBody(502, message));
    if (IsStreamingRpc(head.path)) {
      co_return co_await ex.Respond(ConnectStreamError("not_found", message));
    }
    if (IsRpc(head.path)) co_return co_await ex.Respond(ConnectError(404, "not_found", message));
    co_return co_await ex.Respond(ErrorBody(404, message));
  }
  ex.client = s->client;
  if (health) co_return co_await ex.Respond(NoContent());
  const std::string missing = head.method + " " + head.path +
                              " is not implemented by this server yet: E2B sandboxes run no "
                              "commands, files or code here so far (docs/e2b.md)";
  if (IsStreamingRpc(head.path)) {
    co_return co_await ex.Respond(ConnectStreamError("unimplemented", missing));
  }
  if (IsRpc(head.path)) {
    co_return co_await ex.Respond(ConnectError(501, "unimplemented", missing));
  }
  co_await ex.Respond(ErrorBody(501, missing));
}

}  // namespace ci::daemon::e2b
