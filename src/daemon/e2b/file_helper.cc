#include "daemon/e2b/file_helper.h"

#include "core/json.h"
#include "daemon/e2b/e2b_programs.h"
#include "daemon/e2b/proto_json.h"

namespace ci::daemon::e2b {

namespace asio = boost::asio;

asio::awaitable<std::variant<std::unique_ptr<SandboxProcess>, RpcError>> StartFileHelper(
    const FileContext& c, std::vector<std::string> args, bool stdin) {
  ProcessSpec spec;
  // -I: no user site or PYTHON* variables of the sandbox's; -S: no site import (faster).
  spec.argv = {"python3", "-I", "-S", "-c", std::string(programs::kEnvdFiles)};
  spec.argv.insert(spec.argv.end(), std::make_move_iterator(args.begin()),
                   std::make_move_iterator(args.end()));
  spec.env = c.env;
  spec.cwd = "/";
  spec.stdin = stdin;
  auto started = co_await c.sessions->Spawn(c.sandbox, c.client, std::move(spec));
  if (auto* e = std::get_if<ApiError>(&started)) co_return RpcErrorOf(*e);
  co_return std::move(std::get<std::unique_ptr<SandboxProcess>>(started));
}

std::variant<std::string, RpcError> ParseFileAnswer(std::string_view line) {
  auto doc = ParseJsonObject(line, "the file helper's answer");
  if (!doc.ok()) return RpcError{"internal", doc.status().message()};
  if (const rapidjson::Value* error = Member(*doc, "error"); error && error->IsObject()) {
    RpcError e{"internal", "the file operation failed"};
    (void)StringField(*error, "code", "error", &e.code);
    (void)StringField(*error, "message", "error", &e.message);
    return e;
  }
  const rapidjson::Value* ok = Member(*doc, "ok");
  if (ok == nullptr) return RpcError{"internal", "the file helper's answer has no \"ok\""};
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  ok->Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

asio::awaitable<std::variant<std::string, RpcError>> FinishFileHelper(SandboxProcess& helper,
                                                                      size_t max_bytes) {
  std::string out, err;
  bool too_much = false;
  ProcessOutputSink sink = [&](StreamKind kind, std::string data) -> asio::awaitable<void> {
    std::string& to = kind == StreamKind::kStdout ? out : err;
    const size_t cap = kind == StreamKind::kStdout ? max_bytes : 4096;
    if (to.size() + data.size() > cap) {
      too_much = too_much || kind == StreamKind::kStdout;
      data.resize(cap - std::min(cap, to.size()));
    }
    to += data;
    co_return;
  };
  ProcessEnd end = co_await helper.Wait(std::move(sink));
  if (too_much) {
    co_return RpcError{"resource_exhausted",
                       "the answer is larger than " + std::to_string(max_bytes >> 20) + " MiB"};
  }
  const size_t eol = out.find('\n');
  if (eol == std::string::npos) {
    std::string why = end.error.empty() ? "" : ": " + end.error;
    if (end.signal) why += " (killed by signal " + std::to_string(*end.signal) + ")";
    if (!err.empty()) why += ": " + err;
    co_return RpcError{"internal", "the file operation ended without an answer" + why};
  }
  co_return ParseFileAnswer(std::string_view(out).substr(0, eol));
}

asio::awaitable<std::variant<std::string, RpcError>> RunFileHelper(const FileContext& c,
                                                                   std::vector<std::string> args,
                                                                   size_t max_bytes) {
  auto started = co_await StartFileHelper(c, std::move(args), false);
  if (auto* e = std::get_if<RpcError>(&started)) co_return *e;
  co_return co_await FinishFileHelper(*std::get<std::unique_ptr<SandboxProcess>>(started),
                                      max_bytes);
}

}  // namespace ci::daemon::e2b
