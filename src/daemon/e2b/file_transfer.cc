#include "daemon/e2b/file_transfer.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cctype>
#include <csignal>

#include "core/json.h"
#include "daemon/e2b/control_plane.h"
#include "daemon/e2b/process_requests.h"
#include "daemon/e2b/proto_json.h"
#include "daemon/front/routes.h"
#include "daemon/http/multipart.h"

namespace ci::daemon::e2b {
namespace {

namespace asio = boost::asio;

// envd's status for a helper's error code.
int HttpStatusOf(const RpcError& e) {
  if (e.code == "not_found") return 404;
  if (e.code == "invalid_argument" || e.code == "failed_precondition") return 400;
  if (e.code == "permission_denied") return 403;
  if (e.code == "already_exists") return 409;
  if (e.code == kNoSpace) return 507;
  if (e.code == "resource_exhausted") return 429;
  if (e.code == "unavailable") return 503;
  return 500;
}

HttpResponse Refusal(const RpcError& e) { return ErrorBody(HttpStatusOf(e), e.message); }

// `username`, when given, must be the sandbox's one user (envd answers 401 for others).
std::optional<RpcError> RefusedUsername(const HttpRequestHead& head) {
  auto name = QueryParameter(head.target, "username");
  if (!name || name->empty() || *name == kUser) return std::nullopt;
  return RpcError{"unauthenticated", "user '" + *name +
                                         "' does not exist here: sandboxes run as '" +
                                         std::string(kUser) + "' (leave the user unset)"};
}

// "inline; filename=NAME" as Go's http.ServeContent's caller in envd sets it.
std::string Disposition(std::string_view path) {
  const size_t slash = path.rfind('/');
  std::string name(slash == std::string_view::npos ? path : path.substr(slash + 1));
  std::erase_if(name, [](char c) { return c == '"' || c == '\\' || c < 0x20; });
  return "inline; filename=\"" + name + "\"";
}

asio::awaitable<void> Download(HttpExchange& ex, const FileContext& c, const std::string& path) {
  std::vector<std::string> args = {"read", path};
  auto started = co_await StartFileHelper(c, std::move(args), false);
  if (auto* e = std::get_if<RpcError>(&started)) co_return co_await ex.Respond(Refusal(*e));
  std::unique_ptr<SandboxProcess> helper = std::move(std::get<0>(started));
  std::string head, err;
  std::optional<RpcError> refused;
  bool began = false, gone = false;
  uint64_t size = 0, sent = 0;
  ProcessOutputSink sink = [&](StreamKind kind, std::string data) -> asio::awaitable<void> {
    if (kind == StreamKind::kStderr) {
      if (err.size() < 4096) err += data.substr(0, 4096 - err.size());
      co_return;
    }
    if (refused || gone) co_return;
    if (!began) {
      head += data;
      const size_t eol = head.find('\n');
      if (eol == std::string::npos) co_return;
      auto answer = ParseFileAnswer(std::string_view(head).substr(0, eol));
      if (auto* e = std::get_if<RpcError>(&answer)) {
        refused = *e;
        co_return;
      }
      auto doc = ParseJsonObject(std::get<std::string>(answer), "the read's answer");
      const rapidjson::Value* announced = doc.ok() ? Member(*doc, "size") : nullptr;
      if (announced == nullptr || !announced->IsUint64()) {
        refused = RpcError{"internal", "the read's answer has no size"};
        co_return;
      }
      size = announced->GetUint64();
      data = head.substr(eol + 1);
      began = true;
      if (size == 0) co_return;  // answered below with Content-Length: 0, as the SDK needs
      HeaderList headers = {{"Content-Type", "application/octet-stream"},
                            {"Content-Disposition", Disposition(path)}};
      Status began_stream = co_await ex.BeginStream(200, std::move(headers));
      gone = !began_stream.ok();
    }
    if (data.empty() || gone) co_return;
    sent += data.size();
    Status written = co_await ex.WriteStream(std::move(data));
    gone = !written.ok();
  };
  ProcessEnd end = co_await helper->Wait(std::move(sink));
  if (refused) co_return co_await ex.Respond(Refusal(*refused));
  if (!began) {
    std::string why = "the read ended without an answer";
    if (!end.error.empty()) why += ": " + end.error;
    if (!err.empty()) why += ": " + err;
    co_return co_await ex.Respond(ErrorBody(500, why));
  }
  if (size == 0) {
    HttpResponse empty;
    empty.content_type = "application/octet-stream";
    empty.headers = {{"Content-Disposition", Disposition(path)}};
    co_return co_await ex.Respond(std::move(empty));
  }
  // A file that shrank while it was read: the response is cut short (no last chunk), so the
  // client sees an error rather than a short file.
  if (!gone && sent == size) co_await ex.EndStream();
}

// One file of an upload: its helper, fed as the body arrives while its output is read (it
// answers early when it fails, and a container's exec may not take more input then).
struct UploadState {
  explicit UploadState(const asio::any_io_executor& ex) : ended(ex) {
    ended.expires_at(asio::steady_timer::time_point::max());
  }
  std::shared_ptr<SandboxProcess> helper;
  std::string out;
  bool answered = false;  // its line came: no more input is written
  std::optional<std::variant<std::string, RpcError>> answer;
  asio::steady_timer ended;  // cancelled once `answer` is set
};
using Upload = std::shared_ptr<UploadState>;

asio::awaitable<void> AwaitAnswer(Upload u) {
  ProcessOutputSink sink = [u](StreamKind kind, std::string data) -> asio::awaitable<void> {
    if (kind != StreamKind::kStdout || u->out.size() > (1 << 20)) co_return;
    u->out += data;
    if (!u->answered && u->out.find('\n') != std::string::npos) {
      u->answered = true;
      u->helper->CloseStdin();  // unblocks a write it no longer reads
    }
  };
  ProcessEnd end = co_await u->helper->Wait(std::move(sink));
  const size_t eol = u->out.find('\n');
  if (eol == std::string::npos) {
    u->answer = RpcError{"internal", "the upload ended without an answer" +
                                         (end.error.empty() ? std::string() : ": " + end.error)};
  } else {
    u->answer = ParseFileAnswer(std::string_view(u->out).substr(0, eol));
  }
  u->ended.cancel();
}

asio::awaitable<std::variant<Upload, RpcError>> BeginUpload(const FileContext& c,
                                                            const std::string& path,
                                                            std::string encoding) {
  if (path.empty()) co_return RpcError{"invalid_argument", "the file's path is missing"};
  if (path.find('\0') != std::string::npos) {
    co_return RpcError{"invalid_argument", "the file's path holds a NUL byte"};
  }
  std::vector<std::string> args = {"write", path, std::move(encoding)};
  auto started = co_await StartFileHelper(c, std::move(args), true);
  if (auto* e = std::get_if<RpcError>(&started)) co_return *e;
  auto u = std::make_shared<UploadState>(co_await asio::this_coro::executor);
  u->helper = std::move(std::get<0>(started));
  asio::co_spawn(u->ended.get_executor(), AwaitAnswer(u), asio::detached);
  co_return u;
}

asio::awaitable<void> Feed(const Upload& u, std::string data) {
  if (u->answered || data.empty()) co_return;
  Status written = co_await u->helper->WriteStdin(std::move(data));
  if (!written.ok()) u->answered = true;  // it stopped reading: its answer says why
}

asio::awaitable<std::variant<std::string, RpcError>> EndUpload(const Upload& u) {
  u->helper->CloseStdin();
  while (!u->answer) {
    boost::system::error_code ec;
    co_await u->ended.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return *u->answer;
}

// An upload cut short: SIGTERM, on which the helper drops its temporary file and the old file
// stays as it was.
asio::awaitable<void> AbandonUpload(const FileContext& c, const Upload& u) {
  (void)co_await c.sessions->Signal(c.sandbox, c.client, u->helper->pid(), SIGTERM);
  (void)co_await EndUpload(u);
}

// What a body read failed with, as the client is told.
HttpResponse BodyRefusal(BodyError e, uint64_t max_bytes) {
  if (e == BodyError::kTooLarge) {
    return ErrorBody(413, "the upload is larger than " + std::to_string(max_bytes >> 20) +
                              " MiB (MAX_FILE_SIZE_MB)");
  }
  return ErrorBody(400, "the request's body could not be read");
}

std::string ResultArray(const std::vector<std::string>& written) {
  std::string out = "[";
  for (const std::string& w : written) out += (out.size() > 1 ? "," : "") + w;
  return out + "]";
}

asio::awaitable<void> UploadOctetStream(HttpExchange& ex, const FileContext& c,
                                        const std::string& path, uint64_t max_bytes) {
  std::string encoding(ex.head().Header("content-encoding").value_or("identity"));
  for (char& ch : encoding) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (encoding != "identity" && encoding != "gzip") {
    co_return co_await ex.Respond(
        ErrorBody(400, "Content-Encoding '" + encoding + "' is not supported (gzip is)"));
  }
  auto begun = co_await BeginUpload(c, path, encoding);
  if (auto* e = std::get_if<RpcError>(&begun)) co_return co_await ex.Respond(Refusal(*e));
  const Upload u = std::get<Upload>(begun);
  for (;;) {
    BodyChunk chunk = co_await ex.ReadBodyChunk(max_bytes);
    if (chunk.error != BodyError::kNone) {
      co_await AbandonUpload(c, u);
      if (chunk.error == BodyError::kClientGone) co_return;
      co_return co_await ex.Respond(BodyRefusal(chunk.error, max_bytes));
    }
    if (chunk.data.empty()) break;
    co_await Feed(u, std::move(chunk.data));
    if (u->answered) break;
  }
  auto answer = co_await EndUpload(u);
  if (auto* e = std::get_if<RpcError>(&answer)) co_return co_await ex.Respond(Refusal(*e));
  const std::vector<std::string> written = {std::move(std::get<std::string>(answer))};
  co_await ex.Respond(JsonResponse(200, ResultArray(written)));
}

// What the multipart parser saw in one chunk of the body, replayed to the helpers in order.
struct PartEvent {
  enum Kind { kBegin, kData, kEnd } kind;
  std::string text;  // kBegin: the part's target path ("" for a part that is not a file)
};

asio::awaitable<void> UploadMultipart(HttpExchange& ex, const FileContext& c,
                                      std::string_view content_type, const std::string& path,
                                      uint64_t max_bytes) {
  auto boundary = MultipartParser::BoundaryFromContentType(content_type);
  if (!boundary.ok()) co_return co_await ex.Respond(ErrorBody(400, boundary.status().message()));
  std::vector<PartEvent> events;
  bool in_file = false;
  MultipartParser parser(
      *boundary,
      {.on_part_begin = [&](const MultipartPartHeaders& h) -> Status {
         in_file = h.name == "file";
         if (in_file) {
           events.push_back({PartEvent::kBegin, path.empty() ? h.filename.value_or("") : path});
         }
         return {};
       },
       .on_part_data = [&](std::string_view d) -> Status {
         if (in_file) events.push_back({PartEvent::kData, std::string(d)});
         return {};
       },
       .on_part_end = [&]() -> Status {
         if (in_file) events.push_back({PartEvent::kEnd, ""});
         in_file = false;
         return {};
       }});
  Upload current;
  std::vector<std::string> written;
  std::optional<HttpResponse> failure;
  for (bool body_ended = false; !body_ended && !failure;) {
    BodyChunk chunk = co_await ex.ReadBodyChunk(max_bytes);
    if (chunk.error == BodyError::kClientGone) break;
    if (chunk.error != BodyError::kNone) {
      failure = BodyRefusal(chunk.error, max_bytes);
      break;
    }
    body_ended = chunk.data.empty();
    Status parsed = body_ended ? parser.Finish() : parser.Feed(chunk.data);
    if (!parsed.ok()) failure = ErrorBody(400, parsed.message());
    for (PartEvent& e : events) {
      if (failure) break;
      if (e.kind == PartEvent::kBegin) {
        auto begun = co_await BeginUpload(c, e.text, "identity");
        if (auto* refused = std::get_if<RpcError>(&begun)) {
          failure = Refusal(*refused);
        } else {
          current = std::get<Upload>(begun);
        }
      } else if (e.kind == PartEvent::kData) {
        co_await Feed(current, std::move(e.text));
      } else {
        auto answer = co_await EndUpload(current);
        current.reset();
        if (auto* refused = std::get_if<RpcError>(&answer)) {
          failure = Refusal(*refused);
        } else {
          written.push_back(std::move(std::get<std::string>(answer)));
        }
      }
    }
    events.clear();
  }
  if (current) co_await AbandonUpload(c, current);  // a part cut short
  if (failure) co_return co_await ex.Respond(std::move(*failure));
  if (written.empty()) {
    co_return co_await ex.Respond(ErrorBody(400, "the form has no part named 'file'"));
  }
  co_await ex.Respond(JsonResponse(200, ResultArray(written)));
}

}  // namespace

bool IsFileTransfer(const HttpRequestHead& head) { return head.path == "/files"; }

asio::awaitable<void> HandleFileTransfer(HttpExchange& ex, const FileContext& c,
                                         uint64_t max_upload_bytes) {
  const HttpRequestHead& head = ex.head();
  if (head.method != "GET" && head.method != "POST") {
    co_return co_await ex.Respond(ErrorBody(405, "/files takes GET and POST"));
  }
  if (auto refused = RefusedUsername(head))
    co_return co_await ex.Respond(ErrorBody(401, refused->message));
  const std::string path = QueryParameter(head.target, "path").value_or("");
  if (head.method == "GET") {
    if (path.empty() || path.find('\0') != std::string::npos) {
      co_return co_await ex.Respond(ErrorBody(400, "the query's path is missing or invalid"));
    }
    co_return co_await Download(ex, c, path);
  }
  const std::string content_type(head.Header("content-type").value_or(""));
  if (content_type.starts_with("multipart/form-data")) {
    co_return co_await UploadMultipart(ex, c, content_type, path, max_upload_bytes);
  }
  co_await UploadOctetStream(ex, c, path, max_upload_bytes);
}

}  // namespace ci::daemon::e2b
