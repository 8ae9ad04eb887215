#include "docker/container_exec.h"

#include <spdlog/spdlog.h>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "core/json.h"
#include "docker/sandbox_shell.h"

namespace ci::docker {
namespace {

using namespace std::chrono_literals;
using asio::use_awaitable;

}  // namespace

std::string StringArray(const std::vector<std::string>& v) {
  std::string s = "[";
  for (const auto& x : v) {
    if (s.size() > 1) s += ',';
    s += JsonQuote(x);  // appended: `"," + string&&` trips GCC 12's false -Werror=restrict
  }
  return s + "]";
}

bool ParseObject(const std::string& body, rapidjson::Document& doc) {
  std::string why;
  return ParseJson(body, doc, why) && doc.IsObject();
}

asio::awaitable<Result<StartedExec>> StartExec(const Container& c,
                                               const std::vector<std::string>& cmd,
                                               bool attach_stdin) {
  std::string body = std::string("{\"AttachStdin\":") + (attach_stdin ? "true" : "false") +
                     ",\"AttachStdout\":true,\"AttachStderr\":true,\"Tty\":false,\"Privileged\":"
                     "false,\"Cmd\":" +
                     StringArray(cmd) + ",\"Env\":" + StringArray(c.env) +
                     ",\"WorkingDir\":" + JsonQuote(c.cwd) + ",\"User\":" + JsonQuote(c.user) + "}";
  std::string path = "/containers/" + c.id + "/exec";
  auto created = co_await c.client->Request("POST", path, body);
  if (!created.ok()) co_return created.status();
  // 404: the container was removed; 409: it is not running. Either way it is gone.
  if (created->status == 404 || created->status == 409) {
    co_return Status::Gone(HttpError("docker exec create", *created).message());
  }
  if (created->status != 201) co_return HttpError("docker exec create", *created);
  rapidjson::Document doc;
  if (!ParseObject(created->body, doc) || !doc.HasMember("Id") || !doc["Id"].IsString()) {
    co_return Status::Error("docker exec create: no Id in the answer");
  }
  StartedExec out;
  out.exec_id = doc["Id"].GetString();
  std::string start_path = "/exec/" + out.exec_id + "/start";
  std::string start_body = "{\"Detach\":false,\"Tty\":false}";
  auto stream = co_await c.client->Hijack(start_path, start_body);
  if (!stream.ok()) co_return stream.status();
  out.stream = std::shared_ptr<RawStream>(std::move(stream).value());
  co_return out;
}

// The exit code from exec inspect; the stream can end a moment before the daemon records it.
asio::awaitable<Result<std::optional<int>>> ExecExitCode(const Container& c,
                                                         const std::string& exec_id) {
  std::string path = "/exec/" + exec_id + "/json";
  for (int attempt = 0; attempt < 200; ++attempt) {
    auto r = co_await c.client->Request("GET", path);
    if (!r.ok()) co_return r.status();
    if (!r->ok()) co_return HttpError("docker exec inspect", *r);
    rapidjson::Document doc;
    if (!ParseObject(r->body, doc)) co_return Status::Error("docker exec inspect: bad JSON");
    bool running = doc.HasMember("Running") && doc["Running"].IsBool() && doc["Running"].GetBool();
    if (!running && doc.HasMember("ExitCode") && doc["ExitCode"].IsInt()) {
      co_return std::optional<int>(doc["ExitCode"].GetInt());
    }
    co_await Sleep(10ms);
  }
  co_return std::optional<int>();
}

// Reads a stream to its end, demultiplexing into `demux`.
// `stop` (may be null) is asked after each read whether to stop early.
asio::awaitable<Status> Pump(RawStream& stream, FrameDemuxer& demux,
                             const std::function<bool()>* stop) {
  std::string buf(kReadChunk, '\0');
  for (;;) {
    boost::system::error_code ec;
    size_t n = co_await stream.ReadSome(asio::buffer(buf), ec);
    if (ec) co_return Status::Error("reading the exec stream: " + ec.message());
    if (n == 0) co_return Status();
    if (!demux.Feed(std::string_view(buf.data(), n))) {
      co_return Status::Error("malformed exec stream frame");
    }
    if (stop != nullptr && (*stop)()) co_return Status();
  }
}

asio::awaitable<Result<ExecCapture>> CaptureExec(const Container& c,
                                                 const std::vector<std::string>& cmd,
                                                 CaptureOptions o) {
  auto started = co_await StartExec(c, cmd, static_cast<bool>(o.write_input));
  if (!started.ok()) co_return started.status();
  if (o.hold.active != nullptr) *o.hold.active = started->stream;
  ExecCapture out;
  if (o.write_input) {
    out.input = co_await o.write_input(*started->stream);
    started->stream->ShutdownSend();
  }
  FrameDemuxer demux([&](FrameDemuxer::Stream s, std::string_view bytes) {
    if (o.stdout_only && s != FrameDemuxer::Stream::kStdout) return;
    if (out.output.size() < o.output_cap) out.output.append(bytes);
  });
  out.read = co_await Pump(*started->stream, demux);
  started->stream->Close();
  if (o.hold.active != nullptr) o.hold.active->reset();
  if (o.inspect_exit && !o.hold.Killed()) {
    out.exit_code = co_await ExecExitCode(c, started->exec_id);
  }
  co_return out;
}

asio::awaitable<bool> SetPidsHeadroom(const Container& c, int step) {
  std::string path = "/containers/" + c.id + "/update";
  std::string body =
      "{\"PidsLimit\":" + std::to_string(c.pids_limit + 16u * static_cast<uint32_t>(step)) + "}";
  auto u = co_await c.client->Request("POST", path, body);
  if (step > 0) co_await Sleep(20ms);
  co_return u.ok() && u->ok();
}

// kill(-1) from an exec (sandbox_shell.h). Sessions spare the background programs; the pids
// limit may be full then (a bomb still running): it is raised a little for this exec, as the
// counters probe does, then restored.
asio::awaitable<Status> KillSandboxProcesses(const Container& c, const std::string* background) {
  const std::vector<std::string> cmd = KillArgv(background);
  CaptureOptions quiet;
  quiet.output_cap = 0;
  quiet.inspect_exit = false;
  const int attempts = background != nullptr ? 3 : 1;
  Status s;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (attempt > 0) co_await SetPidsHeadroom(c, attempt);
    auto killed = co_await CaptureExec(c, cmd, quiet);
    if (!killed.ok()) {
      s = killed.status().Context("killing the program");
      continue;
    }
    s = killed->read;
    if (attempt > 0) co_await SetPidsHeadroom(c, 0);
    break;
  }
  co_return s;
}

}  // namespace ci::docker
