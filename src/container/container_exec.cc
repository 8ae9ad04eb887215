#include "container/container_exec.h"

#include "container/sandbox_shell.h"
#include "core/json.h"

namespace ci::container {

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

asio::awaitable<Status> Pump(ExecStream& stream, const ExecOutputSink& sink,
                             const std::function<bool()>* stop) {
  for (;;) {
    auto more = co_await stream.Read(sink);
    if (!more.ok()) co_return more.status();
    if (!*more) co_return Status();
    if (stop != nullptr && (*stop)()) co_return Status();
  }
}

asio::awaitable<Result<ExecCapture>> CaptureExec(const Container& c,
                                                 const std::vector<std::string>& cmd,
                                                 CaptureOptions o) {
  const ExecStdin stdin_use{static_cast<bool>(o.write_input), std::nullopt};
  auto started = co_await c.api->Exec(cmd, stdin_use);
  if (!started.ok()) co_return started.status();
  std::shared_ptr<ExecStream> stream = *started;
  if (o.hold.active != nullptr) *o.hold.active = stream;
  ExecCapture out;
  if (o.write_input) {
    out.input = co_await o.write_input(*stream);
    co_await stream->CloseStdin();
  }
  ExecOutputSink keep = [&](ExecOutput s, std::string_view bytes) {
    if (o.stdout_only && s != ExecOutput::kStdout) return;
    if (out.output.size() < o.output_cap) out.output.append(bytes);
  };
  out.read = co_await Pump(*stream, keep);
  if (o.inspect_exit && !o.hold.Killed()) out.exit_code = co_await stream->ExitCode();
  stream->Close();
  if (o.hold.active != nullptr) o.hold.active->reset();
  co_return out;
}

// kill(-1) from an exec (sandbox_shell.h). Sessions spare the background programs; the pids
// limit may be full then (a bomb still running): it is raised a little for this exec, as the
// counters probe does, then restored.
asio::awaitable<Status> KillSandboxProcesses(const Container& c, const std::string* background) {
  if (c.api->KillAllBut(background)) co_return Status();
  const std::vector<std::string> cmd = KillArgv(background);
  CaptureOptions quiet;
  quiet.output_cap = 0;
  quiet.inspect_exit = false;
  const int attempts = background != nullptr ? 3 : 1;
  Status s;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (attempt > 0) co_await c.api->SetPidsHeadroom(attempt);
    auto killed = co_await CaptureExec(c, cmd, quiet);
    if (!killed.ok()) {
      s = killed.status().Context("killing the program");
      continue;
    }
    s = killed->read;
    if (attempt > 0) co_await c.api->SetPidsHeadroom(0);
    break;
  }
  co_return s;
}

}  // namespace ci::container
