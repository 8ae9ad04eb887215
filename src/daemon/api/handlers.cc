#include "daemon/api/handlers.h"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <deque>

#include "core/json.h"
#include "daemon/api/request_parsing.h"
#include "daemon/api/responses.h"
#include "daemon/http/multipart.h"
#include "daemon/http/sse.h"
#include "daemon/service/async_event.h"
#include "daemon/service/output_buffer.h"
#include "daemon/service/verdict.h"

namespace ci::daemon {
namespace {

constexpr std::string_view kFilesPrefix = "/v1/files/";
constexpr std::string_view kSessionsPath = "/v1/sessions";
constexpr std::string_view kSessionsPrefix = "/v1/sessions/";
constexpr uint64_t kMultipartOverhead = 1 << 20;  // headers and boundaries around the file part

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string FileSizeError(uint64_t max_mb) {
  return "File size exceeds maximum of " + std::to_string(max_mb) + " MB";
}

// 507 Insufficient Storage: the request was fine, the store has no room for it.
std::string StoreFullError(uint64_t max_mb) {
  return "File storage is full (FILE_STORAGE_MAX_MB=" + std::to_string(max_mb) +
         "): delete stored files or raise FILE_STORAGE_MAX_MB";
}

// The metrics' outcome of an execution that ran: the program's own failure is still "ok" for
// the service; only a timeout is told apart.
std::string OutcomeOf(const ExecutionResult& result) {
  return result.run.timed_out ? "timed_out" : "ok";
}

// An execution that did not run: refused for capacity (503, counted as rejected) or failed.
constexpr std::string_view kUnavailable = "unavailable";
std::string OutcomeOf(const ApiError& e) {
  return e.status == 503 ? std::string(kUnavailable) : "error";
}

}  // namespace

ApiHandlers::ApiHandlers(const Config& config, Executor& executor, FileStore& store,
                         ExecutionService& service, SessionManager& sessions, Admission& admission,
                         Metrics& metrics)
    : config_(config),
      executor_(executor),
      store_(store),
      service_(service),
      sessions_(sessions),
      admission_(admission),
      metrics_(metrics) {}

asio::awaitable<void> ApiHandlers::Handle(HttpExchange& ex) {
  using Fn = asio::awaitable<void> (ApiHandlers::*)(HttpExchange&);
  struct Route {
    std::string_view path, method;
    Fn fn;
  };
  static const Route kRoutes[] = {
      {"/health", "GET", &ApiHandlers::Health},
      {"/ready", "GET", &ApiHandlers::Ready},
      {"/metrics", "GET", &ApiHandlers::MetricsText},
      {"/v1/execute", "POST", &ApiHandlers::ExecuteBatchRoute},
      {"/v1/execute/stream", "POST", &ApiHandlers::ExecuteStreamRoute},
      {"/v1/languages", "GET", &ApiHandlers::Languages},
      {"/v1/files", "POST", &ApiHandlers::UploadFile},
      {"/v1/files", "GET", &ApiHandlers::ListFiles},
  };
  const std::string& path = ex.head().path;
  const std::string& method = ex.head().method;
  std::string allowed;
  for (const auto& r : kRoutes) {
    if (r.path != path) continue;
    if (r.method == method) co_return co_await (this->*r.fn)(ex);
    allowed += (allowed.empty() ? "" : ", ") + std::string(r.method);
  }
  if (allowed.empty() && path.size() > kFilesPrefix.size() &&
      path.compare(0, kFilesPrefix.size(), kFilesPrefix) == 0 &&
      path.find('/', kFilesPrefix.size()) == std::string::npos) {
    std::string id = PercentDecode(std::string_view(path).substr(kFilesPrefix.size()));
    if (method == "GET") co_return co_await GetFile(ex, id);
    if (method == "DELETE") co_return co_await DeleteFile(ex, id);
    allowed = "GET, DELETE";
  }
  if (!allowed.empty()) co_return co_await ex.Respond(MethodNotAllowed(allowed));
  if (path == kSessionsPath || path.compare(0, kSessionsPath.size() + 1, kSessionsPrefix) == 0) {
    co_return co_await Sessions(ex);
  }
  co_await ex.Respond(ErrorResponse(404, "Not Found"));
}

asio::awaitable<void> ApiHandlers::ExecuteBatchRoute(HttpExchange& ex) {
  co_await Execute(ex, /*stream=*/false);
}

asio::awaitable<void> ApiHandlers::ExecuteStreamRoute(HttpExchange& ex) {
  co_await Execute(ex, /*stream=*/true);
}

HealthInfo ApiHandlers::Info(const Status& backend) const {
  HealthInfo info;
  info.ok = backend.ok();
  if (!info.ok) info.message = backend.message();
  info.backend = std::string(executor_.name());
  info.network_isolation = executor_.network_isolation();
  info.hardening = executor_.enforcement(service_.spec());
  return info;
}

asio::awaitable<void> ApiHandlers::Health(HttpExchange& ex) {
  co_await ex.Respond(JsonResponse(200, HealthJson(Info(health_))));
}

asio::awaitable<void> ApiHandlers::Ready(HttpExchange& ex) {
  // A fresh check, bounded so a hung backend makes /ready fail rather than hang.
  auto executor = co_await asio::this_coro::executor;
  auto result = std::make_shared<std::optional<Status>>();
  auto done = std::make_shared<AsyncEvent>(executor);
  asio::co_spawn(
      executor,
      [this, result, done]() -> asio::awaitable<void> {
        Status s = co_await executor_.Check();
        *result = std::move(s);
        done->Notify();
      },
      asio::detached);
  asio::steady_timer deadline(
      executor, std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::duration<double>(config_.backend_check_timeout_sec)));
  deadline.async_wait([done](const boost::system::error_code&) { done->Notify(); });
  if (!result->has_value()) co_await done->Wait();
  deadline.cancel();
  Status status = result->has_value()
                      ? **result
                      : Status::Error("backend check did not answer within " +
                                      std::to_string(config_.backend_check_timeout_sec) + " s");
  co_await ex.Respond(JsonResponse(status.ok() ? 200 : 503, HealthJson(Info(status))));
}

asio::awaitable<void> ApiHandlers::Languages(HttpExchange& ex) {
  co_await ex.Respond(JsonResponse(200, LanguagesJson(service_.languages())));
}

HttpResponse ApiHandlers::ApiErrorResponse(const ApiError& e) const {
  HttpResponse r = ErrorResponse(e.status, e.detail);
  if (e.status == 503) {
    r.headers.emplace_back("Retry-After", std::to_string(config_.capacity_retry_after_sec));
  }
  return r;
}

asio::awaitable<std::optional<std::string>> ApiHandlers::ReadJsonBody(HttpExchange& ex) {
  const uint64_t limit = config_.max_request_body_mb << 20;
  BodyChunk body = co_await ReadWholeBody(ex, limit);
  if (body.error == BodyError::kTooLarge) {
    co_await ex.Respond(ErrorResponse(
        413,
        "Request body exceeds maximum of " + std::to_string(config_.max_request_body_mb) + " MB"));
    co_return std::nullopt;
  }
  if (body.error != BodyError::kNone) {
    co_await ex.Respond(ErrorResponse(400, "Invalid request body: incomplete body"));
    co_return std::nullopt;
  }
  co_return std::move(body.data);
}

asio::awaitable<std::optional<Admission::Permit>> ApiHandlers::Admit(HttpExchange& ex,
                                                                     const std::string& operation) {
  auto queued_at = std::chrono::steady_clock::now();
  std::optional<Admission::Permit> permit = co_await admission_.Acquire();
  metrics_.AdmissionWait(
      operation,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - queued_at).count());
  if (!permit) {
    metrics_.Rejected(operation, 429, "saturated");
    HttpResponse r = ErrorResponse(429,
                                   "Execution capacity on this replica is saturated. Retry after "
                                   "the Retry-After delay.");
    r.headers.emplace_back("Retry-After", std::to_string(config_.execution_retry_after_sec));
    co_await ex.Respond(std::move(r));
  }
  co_return permit;
}

asio::awaitable<void> ApiHandlers::Execute(HttpExchange& ex, bool stream) {
  std::optional<std::string> body = co_await ReadJsonBody(ex);
  if (!body) co_return;
  auto request = ParseExecuteRequest(*body, config_.max_exec_timeout_ms);
  if (!request.ok()) co_return co_await ex.Respond(ErrorResponse(422, request.status().message()));

  const std::string operation = stream ? "execute_stream" : "execute";
  std::optional<Admission::Permit> permit = co_await Admit(ex, operation);
  if (!permit) co_return;
  auto admitted_at = std::chrono::steady_clock::now();

  auto plan = service_.Plan(*request);
  if (auto* err = std::get_if<ApiError>(&plan)) {
    co_return co_await ex.Respond(ErrorResponse(err->status, err->detail));
  }
  auto& p = std::get<ExecutionPlan>(plan);
  metrics_.Started(operation);
  Runner run = [this, &p](OutputSink sink, const KillHook& on_sandbox) {
    return service_.Execute(std::move(p), std::move(sink), on_sandbox);
  };
  // No co_await inside ?: — GCC 12 destroys the result of such an expression twice.
  std::string outcome;
  if (stream) {
    outcome = co_await ExecuteStream(ex, run);
  } else {
    outcome = co_await ExecuteBatch(ex, run);
  }
  Finish(operation, outcome, admitted_at);
}

void ApiHandlers::Finish(const std::string& operation, const std::string& outcome,
                         std::chrono::steady_clock::time_point admitted_at) {
  const bool unavailable = outcome == kUnavailable;
  if (unavailable) metrics_.Rejected(operation, 503, "capacity");
  metrics_.Finished(
      operation, unavailable ? "error" : outcome,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - admitted_at).count());
}

asio::awaitable<void> ApiHandlers::MetricsText(HttpExchange& ex) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics_.Render();
  co_await ex.Respond(std::move(r));
}

asio::awaitable<std::string> ApiHandlers::ExecuteBatch(HttpExchange& ex, const Runner& run) {
  CappedOutput out(config_.max_output_bytes), err(config_.max_output_bytes);
  OutputSink sink = [&](StreamKind kind, std::string_view data) {
    (kind == StreamKind::kStdout ? out : err).Append(data);
  };
  std::function<void()> kill;
  bool gone = false;
  ex.WatchClient([&] {
    gone = true;
    if (kill) kill();
  });
  KillHook on_sandbox = [&](std::function<void()> k) {
    kill = std::move(k);
    if (gone) kill();
  };
  auto outcome = co_await run(std::move(sink), on_sandbox);
  co_await ex.UnwatchClient();
  if (auto* e = std::get_if<ApiError>(&outcome)) {
    co_await ex.Respond(ApiErrorResponse(*e));
    co_return OutcomeOf(*e);
  }
  const auto& result = std::get<ExecutionResult>(outcome);
  std::string stdout_text = out.Text(), stderr_text = err.Text();
  OutputSummary summary{
      &stdout_text, &stderr_text, out.truncated(), err.truncated(),
      ComputeVerdict(result.run, result.resources, out.truncated() || err.truncated(),
                     config_.cpu_time_limit_sec)};
  co_await ex.Respond(JsonResponse(200, ExecuteResultJson(result, summary)));
  co_return OutcomeOf(result);
}

asio::awaitable<std::string> ApiHandlers::ExecuteStream(HttpExchange& ex, const Runner& run) {
  // Built before co_await: GCC 12 miscompiles braced string-literal temporaries in a co_await.
  HeaderList headers{{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
  Status began = co_await ex.BeginStream(200, std::move(headers));
  if (!began.ok()) co_return "error";

  auto executor = co_await asio::this_coro::executor;
  Utf8Stream out(config_.max_output_bytes), err(config_.max_output_bytes);
  std::deque<std::string> frames;
  AsyncEvent wake(executor), drained(executor);
  bool finished = false, writer_done = false, gone = false;
  std::function<void()> kill;
  auto client_gone = [&] {
    gone = true;
    if (kill) kill();
  };
  auto push = [&](bool is_stderr, const std::string& text) {
    if (text.empty()) return;
    frames.push_back(SseFrame("output", SseOutputData(is_stderr, text)));
    wake.Notify();
  };
  // The writer sends frames as they are queued; the program never waits on the client.
  asio::co_spawn(
      executor,
      [&]() -> asio::awaitable<void> {
        for (;;) {
          while (!frames.empty()) {
            std::string frame = std::move(frames.front());
            frames.pop_front();
            if (!gone && !(co_await ex.WriteStream(std::move(frame))).ok()) client_gone();
          }
          if (finished) break;
          co_await wake.Wait();
        }
        writer_done = true;
        drained.Notify();
      },
      asio::detached);

  ex.WatchClient(client_gone);
  OutputSink sink = [&](StreamKind kind, std::string_view data) {
    bool is_stderr = kind == StreamKind::kStderr;
    push(is_stderr, (is_stderr ? err : out).Push(data));
  };
  KillHook on_sandbox = [&](std::function<void()> k) {
    kill = std::move(k);
    if (gone) kill();
  };
  auto outcome = co_await run(std::move(sink), on_sandbox);
  co_await ex.UnwatchClient();
  push(false, out.Flush());
  push(true, err.Flush());
  std::string metric_outcome;
  if (auto* e = std::get_if<ApiError>(&outcome)) {
    metric_outcome = OutcomeOf(*e);
    frames.push_back(SseFrame("error", "{\"message\":" + JsonQuote(e->detail) + "}"));
  } else {
    const auto& result = std::get<ExecutionResult>(outcome);
    metric_outcome = OutcomeOf(result);
    bool truncated = out.truncated() || err.truncated();
    OutputSummary summary{
        nullptr, nullptr, out.truncated(), err.truncated(),
        ComputeVerdict(result.run, result.resources, truncated, config_.cpu_time_limit_sec)};
    frames.push_back(SseFrame("result", ExecuteResultJson(result, summary)));
  }
  finished = true;
  wake.Notify();
  while (!writer_done) co_await drained.Wait();
  if (!gone) co_await ex.EndStream();
  co_return metric_outcome;
}

asio::awaitable<void> ApiHandlers::UploadFile(HttpExchange& ex) {
  const std::string kMissing = "A 'file' form field is required.";
  auto content_type = ex.head().Header("content-type");
  if (!content_type || content_type->find("multipart/form-data") == std::string_view::npos) {
    co_return co_await ex.Respond(ErrorResponse(422, kMissing));
  }
  auto boundary = MultipartParser::BoundaryFromContentType(*content_type);
  if (!boundary.ok())
    co_return co_await ex.Respond(ErrorResponse(422, boundary.status().message()));

  const uint64_t max_bytes = config_.max_file_size_mb << 20;
  const std::string size_error = FileSizeError(config_.max_file_size_mb);
  std::unique_ptr<FileStore::Upload> upload;
  std::string filename;
  bool in_file = false, have_file = false;
  std::optional<FileMeta> committed;
  MultipartParser parser(
      *boundary, {
                     .on_part_begin = [&](const MultipartPartHeaders& h) -> Status {
                       in_file = h.name == "file" && !have_file;
                       if (!in_file) return {};
                       auto u = store_.BeginUpload(max_bytes);
                       if (!u.ok()) return u.status();
                       upload = std::move(u).value();
                       filename = SanitizeUtf8(h.filename.value_or(""));  // it is echoed in JSON
                       have_file = true;
                       return {};
                     },
                     .on_part_data = [&](std::string_view data) -> Status {
                       return in_file ? upload->Write(data) : Status();
                     },
                     .on_part_end = [&]() -> Status {
                       if (!in_file) return {};
                       in_file = false;
                       auto meta = upload->Commit(filename);
                       if (!meta.ok()) return meta.status();
                       committed = std::move(meta).value();
                       return {};
                     },
                 });
  Status parse;
  for (;;) {
    BodyChunk chunk = co_await ex.ReadBodyChunk(max_bytes + kMultipartOverhead);
    if (chunk.error == BodyError::kTooLarge) {
      co_return co_await ex.Respond(ErrorResponse(413, size_error));
    }
    if (chunk.error != BodyError::kNone) {
      co_return co_await ex.Respond(ErrorResponse(400, "Invalid request body: incomplete body"));
    }
    if (chunk.end) break;
    parse = parser.Feed(chunk.data);
    if (!parse.ok()) break;
  }
  if (parse.ok()) parse = parser.Finish();
  if (!parse.ok() && committed) store_.Delete(committed->file_id);
  if (!parse.ok() && upload && upload->store_full()) {
    spdlog::warn("[{}] upload refused: the file store is full ({} of {} MB used)",
                 ex.head().request_id, store_.used_bytes() >> 20, config_.file_storage_max_mb);
    co_return co_await ex.Respond(ErrorResponse(507, StoreFullError(config_.file_storage_max_mb)));
  }
  if (!parse.ok() && parse.message() == size_error) {
    co_return co_await ex.Respond(ErrorResponse(413, size_error));
  }
  if (!parse.ok()) co_return co_await ex.Respond(ErrorResponse(422, parse.message()));
  if (!committed) co_return co_await ex.Respond(ErrorResponse(422, kMissing));
  spdlog::info("[{}] stored file {} ({} bytes)", ex.head().request_id, committed->file_id,
               committed->size_bytes);
  co_await ex.Respond(JsonResponse(201, FileMetaJson(*committed, /*with_upload_time=*/false)));
}

asio::awaitable<void> ApiHandlers::ListFiles(HttpExchange& ex) {
  co_await ex.Respond(JsonResponse(200, FileListJson(store_.List())));
}

asio::awaitable<void> ApiHandlers::GetFile(HttpExchange& ex, const std::string& id) {
  // Pinned until the response is sent: a delete meanwhile cannot turn it into a 500.
  auto pin = store_.Pin(id);
  if (!pin)
    co_return co_await ex.Respond(ErrorResponse(404, "File with ID '" + id + "' not found"));
  HttpResponse r;
  r.content_type = "application/octet-stream";
  r.file_path = pin->path();
  r.headers.emplace_back("Content-Disposition", AttachmentContentDisposition(pin->meta().filename));
  co_await ex.Respond(std::move(r));
}

asio::awaitable<void> ApiHandlers::DeleteFile(HttpExchange& ex, const std::string& id) {
  if (!store_.Delete(id)) {
    co_return co_await ex.Respond(ErrorResponse(404, "File with ID '" + id + "' not found"));
  }
  co_await ex.Respond(NoContent());
}

}  // namespace ci::daemon
