#include "daemon/e2b/code_interpreter.h"

#include <algorithm>
#include <cctype>

#include "core/json.h"
#include "daemon/e2b/proto_json.h"
#include "daemon/front/routes.h"

namespace ci::daemon::e2b {
namespace {

namespace asio = boost::asio;

HttpResponse PlainText(int status, std::string text) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(text);
  return r;
}

HttpResponse TextRefusal(const RpcError& e) {
  int status = 500;
  if (e.code == "not_found") status = 404;
  if (e.code == "invalid_argument") status = 400;
  if (e.code == "resource_exhausted") status = 429;
  if (e.code == "unavailable") status = 503;
  return PlainText(status, e.message);
}

// As E2B's server: lower case, trimmed, js -> javascript, ts -> typescript; "" -> python.
std::string NormalLanguage(std::string language) {
  std::erase_if(language, [](unsigned char c) { return std::isspace(c); });
  for (char& c : language) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (language.empty()) return "python";
  if (language == "js") return "javascript";
  if (language == "ts") return "typescript";
  return language;
}

std::optional<RpcError> Unoffered(const std::string& language) {
  if (CodeContexts::Offers(language)) return std::nullopt;
  return RpcError{"invalid_argument",
                  "language '" + language +
                      "' is not offered by this server (python, javascript and bash are)"};
}

struct ExecuteRequest {
  Cell cell;
  std::optional<std::string> context_id;
  std::string language;
};

Result<ExecuteRequest> ParseExecute(std::string_view body) {
  auto doc = ParseJsonObject(body, "the body");
  if (!doc.ok()) return doc.status();
  ExecuteRequest r;
  const rapidjson::Value* code = Member(*doc, "code");
  if (code == nullptr || !code->IsString()) return Status::Error("'code' (a string) is required");
  r.cell.code.assign(code->GetString(), code->GetStringLength());
  std::string id, language;
  if (Status s = StringField(*doc, "context_id", "the body", &id); !s.ok()) return s;
  if (Status s = StringField(*doc, "language", "the body", &language); !s.ok()) return s;
  if (!id.empty() && !language.empty()) {
    return Status::Error("give context_id or language, not both");
  }
  if (!id.empty()) r.context_id = id;
  r.language = NormalLanguage(language);
  if (const rapidjson::Value* env = Member(*doc, "env_vars")) {
    if (!env->IsObject()) return Status::Error("'env_vars' must be an object of strings");
    for (const auto& m : env->GetObject()) {
      const std::string key(m.name.GetString(), m.name.GetStringLength());
      if (!m.value.IsString() || key.empty() || key.find('=') != std::string::npos ||
          key.find('\0') != std::string::npos) {
        return Status::Error("'env_vars' must map names (no '=') to strings: " + key);
      }
      r.cell.env_vars[key] = std::string(m.value.GetString(), m.value.GetStringLength());
    }
  }
  return r;
}

asio::awaitable<void> Execute(HttpExchange& ex, const FileContext& c, CodeContexts& contexts,
                              std::string_view body) {
  auto req = ParseExecute(body);
  if (!req.ok()) co_return co_await ex.Respond(PlainText(400, req.status().message()));
  if (!req->context_id) {
    if (auto e = Unoffered(req->language)) co_return co_await ex.Respond(TextRefusal(*e));
  }
  bool began = false, gone = false, watching = false;
  CellLineSink sink = [&](std::string line) -> asio::awaitable<bool> {
    if (!began) {
      HeaderList headers = {{"Content-Type", "application/x-ndjson"}};
      began = true;
      Status started = co_await ex.BeginStream(200, std::move(headers));
      gone = !started.ok();
    }
    if (!gone) {
      line += '\n';
      Status written = co_await ex.WriteStream(std::move(line));
      gone = !written.ok();
    }
    co_return !gone;
  };
  ClientWatch watch = [&](std::function<void()> on_gone) {
    watching = true;
    ex.WatchClient(std::move(on_gone));
  };
  auto failed = co_await contexts.Execute(c, std::move(req->context_id), std::move(req->language),
                                          std::move(req->cell), std::move(sink), std::move(watch));
  if (watching) co_await ex.UnwatchClient();
  if (failed && !began) co_return co_await ex.Respond(TextRefusal(*failed));
  if (!began) {
    HeaderList headers = {{"Content-Type", "application/x-ndjson"}};
    Status started = co_await ex.BeginStream(200, std::move(headers));
    if (!started.ok()) co_return;
  } else if (gone) {
    co_return;
  }
  Status ended = co_await ex.WriteStream("{\"type\":\"end_of_execution\"}\n");
  if (ended.ok()) co_await ex.EndStream();
}

void ContextJson(JsonWriter& w, const ContextInfo& info) {
  w.StartObject();
  WriteField(w, "id", info.id);
  WriteField(w, "language", info.language);
  WriteField(w, "cwd", info.cwd);
  w.EndObject();
}

asio::awaitable<void> CreateContext(HttpExchange& ex, const FileContext& c, CodeContexts& contexts,
                                    std::string_view body) {
  auto doc = ParseJsonObject(body, "the body");
  if (!doc.ok()) co_return co_await ex.Respond(PlainText(400, doc.status().message()));
  std::string language, cwd;
  Status s = StringField(*doc, "language", "the body", &language);
  if (s.ok()) s = StringField(*doc, "cwd", "the body", &cwd);
  if (!s.ok()) co_return co_await ex.Respond(PlainText(400, s.message()));
  language = NormalLanguage(language);
  if (auto e = Unoffered(language)) co_return co_await ex.Respond(TextRefusal(*e));
  if (cwd.empty()) cwd = std::string(kHome);
  if (!cwd.starts_with('/')) cwd = std::string(kHome) + "/" + cwd;
  auto made = co_await contexts.Create(c, std::move(language), std::move(cwd));
  if (auto* e = std::get_if<RpcError>(&made)) co_return co_await ex.Respond(TextRefusal(*e));
  const ContextInfo& info = std::get<ContextInfo>(made);
  HttpResponse created = JsonResponse(200, JsonText([&](JsonWriter& w) { ContextJson(w, info); }));
  co_await ex.Respond(std::move(created));
}

}  // namespace

bool IsCodeInterpreter(const HttpRequestHead& head) {
  return head.path == "/execute" || TakesSandboxIdAlone(head);
}

bool TakesSandboxIdAlone(const HttpRequestHead& head) {
  return head.path == "/contexts" || head.path.starts_with("/contexts/");
}

asio::awaitable<void> HandleCodeInterpreter(HttpExchange& ex, const FileContext& c,
                                            CodeContexts& contexts, uint64_t max_body_bytes) {
  const std::string method = ex.head().method;
  const std::string path = ex.head().path;
  std::string body;
  if (method == "POST") {
    BodyChunk read = co_await ReadWholeBody(ex, max_body_bytes);
    if (read.error == BodyError::kClientGone) co_return;
    if (read.error == BodyError::kTooLarge) {
      co_return co_await ex.Respond(PlainText(
          413, "the request is larger than " + std::to_string(max_body_bytes >> 20) + " MiB"));
    }
    if (read.error != BodyError::kNone) {
      co_return co_await ex.Respond(PlainText(400, "the request's body could not be read"));
    }
    body = std::move(read.data);
  }
  if (path == "/execute" && method == "POST") co_return co_await Execute(ex, c, contexts, body);
  if (path == "/contexts" && method == "POST") {
    co_return co_await CreateContext(ex, c, contexts, body);
  }
  if (path == "/contexts" && method == "GET") {
    const std::vector<ContextInfo> list = contexts.List(c.sandbox);
    HttpResponse listed = JsonResponse(200, JsonText([&](JsonWriter& w) {
                                         w.StartArray();
                                         for (const ContextInfo& i : list) ContextJson(w, i);
                                         w.EndArray();
                                       }));
    co_return co_await ex.Respond(std::move(listed));
  }
  if (auto id = MatchPath("/contexts/{id}/restart", path); id && method == "POST") {
    auto failed = co_await contexts.Restart(c, *id);
    if (failed) co_return co_await ex.Respond(TextRefusal(*failed));
    co_return co_await ex.Respond(JsonResponse(200, "null"));
  }
  if (auto id = MatchPath("/contexts/{id}", path); id && method == "DELETE") {
    auto failed = co_await contexts.Remove(c, *id);
    if (failed) co_return co_await ex.Respond(TextRefusal(*failed));
    co_return co_await ex.Respond(NoContent());
  }
  co_await ex.Respond(
      PlainText(405, method + " " + path + " is not a route of the code interpreter"));
}

}  // namespace ci::daemon::e2b
