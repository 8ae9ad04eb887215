#include "daemon/e2b/code_contexts.h"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <csignal>

#include "core/json.h"
#include "core/random.h"
#include "daemon/e2b/e2b_programs.h"
#include "daemon/e2b/proto_json.h"
#include "daemon/service/async_event.h"
#include "daemon/service/python_program.h"

namespace ci::daemon::e2b {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// A line of the context's stream longer than this (a huge image) is dropped whole.
constexpr size_t kMaxLine = 64u << 20;
// How long an interrupted cell (its client left) may take to end before its context is killed.
constexpr auto kInterruptGrace = 5s;

struct CodeContexts::Context {
  explicit Context(const asio::any_io_executor& ex) : idle(ex), sink_idle(ex), cell_ended(ex) {
    cell_ended.expires_at(asio::steady_timer::time_point::max());
  }
  ContextInfo info;
  FileContext where;
  std::shared_ptr<SandboxProcess> process;  // null: not running (never started, or it ended)
  uint64_t generation = 0;                  // of `process`: an older one's reader stands down
  bool busy = false;                        // a cell runs; the next waits for `idle`
  AsyncEvent idle;
  // The cell in flight.
  std::string nonce;
  CellLineSink sink;
  bool sink_busy = false;  // a line is being written: the next (an end from Restart) waits
  AsyncEvent sink_idle;
  bool cell_done = true;
  bool client_gone = false;
  asio::steady_timer cell_ended;  // cancelled at its end, or when its client leaves
  std::string pending;            // the start of a line not ended yet
  bool overlong = false;          // dropping a line past kMaxLine
};

namespace {

std::string ErrorLine(std::string_view name, std::string_view value) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "type", "error");
    WriteField(w, "name", name);
    WriteField(w, "value", value);
    WriteField(w, "traceback", "");
    w.EndObject();
  });
}

// One line to the cell's client, one at a time: false when the client is gone.
asio::awaitable<bool> Deliver(std::shared_ptr<CodeContexts::Context> c, std::string line) {
  while (c->sink_busy) co_await c->sink_idle.Wait();
  if (!c->sink || c->client_gone) co_return false;
  if (c->cell_done) co_return true;  // ended meanwhile (restarted): the line is dropped
  c->sink_busy = true;
  const bool delivered = co_await c->sink(std::move(line));
  c->sink_busy = false;
  c->sink_idle.Notify();
  co_return delivered;
}

// The cell in flight ends (its process ended or was replaced) with this error line.
asio::awaitable<void> EndCellWith(std::shared_ptr<CodeContexts::Context> c, std::string line) {
  if (c->cell_done) co_return;
  (void)co_await Deliver(c, std::move(line));
  c->cell_done = true;
  c->cell_ended.cancel();
}

}  // namespace

CodeContexts::ContextPtr CodeContexts::Find(const std::string& sandbox,
                                            const std::string& id) const {
  auto s = by_sandbox_.find(sandbox);
  if (s == by_sandbox_.end()) return nullptr;
  auto it = s->second.find(id);
  return it == s->second.end() ? nullptr : it->second;
}

asio::awaitable<std::optional<RpcError>> CodeContexts::Start(const FileContext& c,
                                                             ContextPtr context) {
  ProcessSpec spec;
  static const std::string program = WithRichResults(programs::kCodeContext);
  spec.argv = {"python3", "-I", "-c", program, context->info.language, context->info.cwd};
  if (context->info.language == "javascript") {
    spec.argv.emplace_back(programs::kJavaScriptKernel);
  }
  spec.env = c.env;
  spec.cwd = context->info.cwd;
  spec.stdin = true;
  spec.keeps_session_busy = false;  // its cells do (Execute)
  auto started = co_await c.sessions->Spawn(c.sandbox, c.client, std::move(spec));
  if (auto* e = std::get_if<ApiError>(&started)) co_return RpcErrorOf(*e);
  context->process = std::move(std::get<std::unique_ptr<SandboxProcess>>(started));
  ++context->generation;
  context->pending.clear();
  context->overlong = false;
  asio::co_spawn(context->cell_ended.get_executor(), Read(context), asio::detached);
  co_return std::nullopt;
}

// The context's stdout, line by line, to the cell in flight; its end ends that cell too.
asio::awaitable<void> CodeContexts::Read(ContextPtr context) {
  const std::shared_ptr<SandboxProcess> process = context->process;
  const uint64_t generation = context->generation;
  std::string driver_err;
  ProcessOutputSink sink = [&](StreamKind kind, std::string data) -> asio::awaitable<void> {
    if (context->generation != generation) co_return;
    if (kind == StreamKind::kStderr) {  // the interpreter's own (the cells' go to stdout)
      if (driver_err.size() < 4096) driver_err += data.substr(0, 4096 - driver_err.size());
      co_return;
    }
    context->pending += data;
    size_t eol;
    while ((eol = context->pending.find('\n')) != std::string::npos) {
      std::string line = context->pending.substr(0, eol);
      context->pending.erase(0, eol + 1);
      if (std::exchange(context->overlong, false)) continue;
      auto doc = ParseJsonObject(line, "a line");
      std::string type, nonce;
      if (!doc.ok() || !StringField(*doc, "type", "", &type).ok() || type.empty()) {
        continue;  // what a cell wrote past the interpreter
      }
      if (type == "end_of_execution") {
        const bool ours = StringField(*doc, "nonce", "", &nonce).ok() && nonce == context->nonce;
        if (ours && !context->cell_done) {
          context->cell_done = true;
          context->cell_ended.cancel();
        }
        continue;
      }
      if (context->cell_done || context->client_gone || !context->sink) continue;
      const bool delivered = co_await Deliver(context, std::move(line));
      if (!delivered) {
        context->client_gone = true;
        context->cell_ended.cancel();
      }
    }
    if (context->pending.size() > kMaxLine) {
      context->pending.clear();
      context->overlong = true;
    }
  };
  ProcessEnd end = co_await process->Wait(std::move(sink));
  if (context->generation != generation) co_return;  // restarted or removed meanwhile
  context->process.reset();
  std::string why = end.error.empty() ? "" : end.error;
  if (end.exit_code) why = "it exited with " + std::to_string(*end.exit_code);
  if (end.signal) why = "it was killed by signal " + std::to_string(*end.signal);
  if (!driver_err.empty()) why += ": " + driver_err;
  co_await EndCellWith(context, ErrorLine("ContextDied", "the context's interpreter ended (" + why +
                                                             "); its next cell starts afresh"));
  // Its sandbox gone, its entry goes too (a container's interpreter may end with an exit code
  // when its sandbox is removed, so the session is asked).
  bool sandbox_gone = !end.error.empty();
  if (!sandbox_gone) {
    const bool exists =
        co_await context->where.sessions->Exists(context->where.sandbox, context->where.client);
    sandbox_gone = !exists;
  }
  if (sandbox_gone && context->generation == generation) {
    auto s = by_sandbox_.find(context->where.sandbox);
    if (s != by_sandbox_.end()) {
      auto it = s->second.find(context->info.id);
      if (it != s->second.end() && it->second == context) s->second.erase(it);
      if (s->second.empty()) by_sandbox_.erase(s);
    }
    auto d = default_of_.find({context->where.sandbox, context->info.language});
    if (d != default_of_.end() && d->second == context->info.id) default_of_.erase(d);
  }
}

asio::awaitable<void> CodeContexts::Stop(const FileContext& c, const ContextPtr& context,
                                         int signal) {
  if (!context->process) co_return;
  (void)co_await c.sessions->Signal(c.sandbox, c.client, context->process->pid(), signal);
}

asio::awaitable<std::variant<ContextInfo, RpcError>> CodeContexts::Create(const FileContext& c,
                                                                          std::string language,
                                                                          std::string cwd) {
  auto context = std::make_shared<Context>(co_await asio::this_coro::executor);
  context->info = {RandomHex(16), std::move(language), std::move(cwd)};
  context->where = c;
  if (auto e = co_await Start(c, context)) co_return *e;
  by_sandbox_[c.sandbox][context->info.id] = context;
  co_return context->info;
}

std::vector<ContextInfo> CodeContexts::List(const std::string& sandbox) const {
  std::vector<ContextInfo> out;
  auto s = by_sandbox_.find(sandbox);
  if (s == by_sandbox_.end()) return out;
  for (const auto& [id, context] : s->second) out.push_back(context->info);
  return out;
}

asio::awaitable<std::optional<RpcError>> CodeContexts::Restart(const FileContext& c,
                                                               const std::string& id) {
  ContextPtr context = Find(c.sandbox, id);
  if (!context) co_return RpcError{"not_found", "Context " + id + " not found"};
  ++context->generation;  // first: the old reader, seeing its process killed, stands down
  co_await Stop(c, context, SIGKILL);
  context->process.reset();
  co_await EndCellWith(context, ErrorLine("ContextRestarted", "the context was restarted"));
  co_return co_await Start(c, context);
}

asio::awaitable<std::optional<RpcError>> CodeContexts::Remove(const FileContext& c,
                                                              const std::string& id) {
  ContextPtr context = Find(c.sandbox, id);
  if (!context) co_return RpcError{"not_found", "Context " + id + " not found"};
  by_sandbox_[c.sandbox].erase(id);
  if (by_sandbox_[c.sandbox].empty()) by_sandbox_.erase(c.sandbox);
  auto d = default_of_.find({c.sandbox, context->info.language});
  if (d != default_of_.end() && d->second == id) default_of_.erase(d);
  ++context->generation;
  co_await Stop(c, context, SIGKILL);
  context->process.reset();
  co_await EndCellWith(context, ErrorLine("ContextRemoved", "the context was removed"));
  co_return std::nullopt;
}

asio::awaitable<std::optional<RpcError>> CodeContexts::Execute(const FileContext& c,
                                                               std::optional<std::string> id,
                                                               std::string language, Cell cell,
                                                               CellLineSink sink,
                                                               ClientWatch watch) {
  if (!id) {
    std::pair<std::string, std::string> key(c.sandbox, language);
    auto d = default_of_.find(key);
    if (d == default_of_.end()) {
      std::string home(kHome);
      auto made = co_await Create(c, std::move(language), std::move(home));
      if (auto* e = std::get_if<RpcError>(&made)) co_return *e;
      d = default_of_.emplace(std::move(key), std::get<ContextInfo>(made).id).first;
    }
    id = d->second;
  }
  // A paused sandbox wakes for a cell (its context's interpreter may be frozen), and the idle
  // sweep leaves it while the cell runs.
  auto resumed = co_await c.sessions->Resume(c.sandbox, c.client);
  if (auto* e = std::get_if<ApiError>(&resumed)) co_return RpcErrorOf(*e);
  const std::shared_ptr<void> in_use = c.sessions->KeepBusy(c.sandbox);
  ContextPtr context = Find(c.sandbox, *id);
  while (context && context->busy) {
    co_await context->idle.Wait();
    context = Find(c.sandbox, *id);  // removed meanwhile?
  }
  if (!context) co_return RpcError{"not_found", "Context " + *id + " not found"};
  context->busy = true;
  std::optional<RpcError> failed;
  if (!context->process) failed = co_await Start(c, context);  // ended: it starts afresh
  if (!failed) {
    context->nonce = RandomHex(16);
    context->sink = std::move(sink);
    context->cell_done = false;
    context->client_gone = false;
    context->cell_ended.expires_at(asio::steady_timer::time_point::max());
    std::string request = JsonText([&](JsonWriter& w) {
      w.StartObject();
      WriteField(w, "code", cell.code);
      w.Key("env_vars");
      w.StartObject();
      for (const auto& [k, v] : cell.env_vars) WriteField(w, k, v);
      w.EndObject();
      WriteField(w, "nonce", context->nonce);
      w.EndObject();
    });
    Status written = co_await context->process->WriteStdin(request + "\n");
    if (!written.ok()) {
      context->cell_done = true;
      failed = RpcError{"internal", "the context's interpreter is gone: " + written.message()};
    } else {
      watch([context] {
        context->client_gone = true;
        context->cell_ended.cancel();
      });
    }
    bool interrupted = false;
    while (!context->cell_done) {
      if (context->client_gone && !interrupted) {
        interrupted = true;  // SIGINT: KeyboardInterrupt in the cell; then, if it holds on, kill
        co_await Stop(c, context, SIGINT);
        context->cell_ended.expires_after(kInterruptGrace);
      }
      boost::system::error_code ec;
      co_await context->cell_ended.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (!ec && !context->cell_done) {
        spdlog::info("e2b context {} did not end its interrupted cell: killed", context->info.id);
        co_await Stop(c, context, SIGKILL);
        context->cell_ended.expires_at(asio::steady_timer::time_point::max());
      }
    }
    context->sink = nullptr;
  }
  context->busy = false;
  context->idle.Notify();
  co_return failed;
}

}  // namespace ci::daemon::e2b
