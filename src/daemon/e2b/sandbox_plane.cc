#include "daemon/e2b/sandbox_plane.h"

#include "core/json.h"
#include "daemon/e2b/code_interpreter.h"
#include "daemon/e2b/connect_rpc.h"
#include "daemon/e2b/file_transfer.h"
#include "daemon/e2b/filesystem_rpcs.h"
#include "daemon/e2b/process_rpcs.h"

namespace ci::daemon::e2b {
namespace {

bool IsRpc(std::string_view path) { return IsProcessRpc(path) || IsFilesystemRpc(path); }

bool IsStreamingRpc(std::string_view path) {
  return IsStreamingProcessRpc(path) || IsStreamingFilesystemRpc(path);
}

// What every process of the sandbox starts with: the sandbox's environment, its user's, and the
// envVars it was created with.
std::vector<std::string> ProcessEnv(const SandboxSpec& spec, const ControlPlane::Sandbox& s) {
  std::vector<std::string> env = spec.env.empty() ? DefaultSandboxEnv() : spec.env;
  std::erase_if(env, [](const std::string& e) { return e.starts_with("HOME="); });
  env.push_back("HOME=" + std::string(kHome));
  env.push_back("USER=user");
  env.push_back("LOGNAME=user");
  for (const auto& [k, v] : s.env_vars) {
    std::erase_if(env, [&](const std::string& e) { return e.starts_with(k + "="); });
    env.push_back(k + "=" + v);
  }
  return env;
}

}  // namespace

bool IsSandboxPlane(const HttpRequestHead& head) {
  return head.Header("e2b-sandbox-id").has_value();
}

boost::asio::awaitable<void> HandleSandboxPlane(HttpExchange& ex, const SandboxPlane& plane) {
  const HttpRequestHead& head = ex.head();
  const std::string id(head.Header("e2b-sandbox-id").value_or(""));
  const std::string_view token =
      head.Header("x-access-token").value_or(head.Header("e2b-traffic-access-token").value_or(""));
  // /contexts: the SDK sends no token there; one that is sent must be the sandbox's.
  const bool id_alone = TakesSandboxIdAlone(head) && !head.Header("x-access-token") &&
                        !head.Header("e2b-traffic-access-token");
  const ControlPlane::Sandbox* s = nullptr;
  if (id_alone) {
    s = co_await plane.control.FindById(id);
  } else {
    s = co_await plane.control.FindByToken(id, token);
  }
  const bool health = head.path == "/health" && head.method == "GET";
  if (s == nullptr) {
    // The SDK reads 502 from /health as "not running"; elsewhere the sandbox is not found (an
    // unknown id and a wrong token answer the same, so neither can be probed for).
    const std::string message = "sandbox '" + id + "' not found, or the access token is not its";
    if (health) co_return co_await ex.Respond(ErrorBody(502, message));
    if (IsStreamingRpc(head.path)) {
      co_return co_await ex.Respond(ConnectStreamError("not_found", message));
    }
    if (IsRpc(head.path)) co_return co_await ex.Respond(ConnectError("not_found", message));
    co_return co_await ex.Respond(ErrorBody(404, message));
  }
  ex.client = s->client;
  if (health) co_return co_await ex.Respond(NoContent());
  if (IsProcessRpc(head.path)) {
    const ProcessContext context{s->id, s->client, ProcessEnv(plane.spec, *s), std::string(kHome),
                                 plane.max_body_bytes};
    co_return co_await HandleProcessRpc(ex, context, plane.processes);
  }
  const FileContext files{&plane.sessions, s->id, s->client, ProcessEnv(plane.spec, *s)};
  if (IsFilesystemRpc(head.path)) {
    co_return co_await HandleFilesystemRpc(ex, files, plane.max_body_bytes);
  }
  if (IsFileTransfer(head)) {
    co_return co_await HandleFileTransfer(ex, files, plane.max_upload_bytes);
  }
  if (IsCodeInterpreter(head)) {
    co_return co_await HandleCodeInterpreter(ex, files, plane.contexts, plane.max_body_bytes);
  }
  const std::string missing = head.method + " " + head.path +
                              " is not a route of envd or the code interpreter here (docs/e2b.md)";
  if (IsStreamingRpc(head.path)) {
    co_return co_await ex.Respond(ConnectStreamError("unimplemented", missing));
  }
  if (IsRpc(head.path)) {
    co_return co_await ex.Respond(ConnectError("unimplemented", missing));
  }
  co_await ex.Respond(ErrorBody(501, missing));
}

}  // namespace ci::daemon::e2b
