#include "daemon/e2b/process_table.h"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cctype>
#include <csignal>
#include <cstring>

#include "core/base64.h"
#include "core/json.h"
#include "core/short_id.h"
#include "daemon/service/async_event.h"

namespace ci::daemon::e2b {

namespace asio = boost::asio;

// A watcher this far behind the process's output is dropped rather than let the daemon's memory
// grow with a client that does not read.
constexpr size_t kMaxQueuedBytes = 16u << 20;

struct ProcessTable::Entry {
  explicit Entry(const asio::any_io_executor& ex) : lifetime(ex), stdin_idle(ex) {}
  std::string sandbox, client;
  uint32_t pid = 0;
  std::optional<std::string> tag;
  ProcessConfig config;
  bool stdin_open = false;
  bool writing = false;  // a SendInput is writing: the next waits for stdin_idle
  bool ended = false;
  std::unique_ptr<SandboxProcess> process;
  std::vector<WatcherPtr> watchers;
  asio::steady_timer lifetime;
  AsyncEvent stdin_idle;
};

namespace {

std::string EventJson(const std::function<void(JsonWriter&)>& event) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    w.Key("event");
    w.StartObject();
    event(w);
    w.EndObject();
    w.EndObject();
  });
}

std::string DataEvent(StreamKind kind, std::string_view bytes) {
  return EventJson([&](JsonWriter& w) {
    w.Key("data");
    w.StartObject();
    WriteField(w, kind == StreamKind::kStdout ? "stdout" : "stderr", Base64Encode(bytes));
    w.EndObject();
  });
}

// As envd reports it (Go's os.ProcessState): "exit status N", or "signal: killed" and -1.
std::string EndEvent(const ProcessEnd& end) {
  std::string status;
  int code = -1;
  if (end.exit_code) {
    code = *end.exit_code;
    status = "exit status " + std::to_string(code);
  } else if (end.signal) {
    std::string name = ::strsignal(*end.signal);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    status = "signal: " + name;
  }
  return EventJson([&](JsonWriter& w) {
    w.Key("end");
    w.StartObject();
    w.Key("exitCode");
    w.Int(code);
    w.Key("exited");
    w.Bool(end.exit_code.has_value());
    WriteField(w, "status", status);
    if (!end.error.empty()) WriteField(w, "error", end.error);
    w.EndObject();
  });
}

void Queue(ProcessWatcher& w, std::string event) {
  if (w.dropped) return;
  w.bytes += event.size();
  if (w.bytes > kMaxQueuedBytes) {
    w.dropped =
        RpcError{"resource_exhausted", "this stream fell " + std::to_string(kMaxQueuedBytes >> 20) +
                                           " MiB behind the process's output; the process runs on "
                                           "(Connect to it again)"};
    w.events.clear();
  } else {
    w.events.push_back(std::move(event));
  }
  w.wake.cancel();
}

}  // namespace

RpcError RpcErrorOf(const ApiError& e) {
  switch (e.status) {
    case 404:
    case 410:
      return {"not_found", e.detail};
    case 400:
      return {"invalid_argument", e.detail};
    case 429:
      return {"resource_exhausted", e.detail};
    case 503:
      return {"unavailable", e.detail};
    default:
      return {"internal", e.detail};
  }
}

std::string ProcessTable::StartEvent(uint32_t pid) {
  return EventJson([&](JsonWriter& w) {
    w.Key("start");
    w.StartObject();
    w.Key("pid");
    w.Uint(pid);
    w.EndObject();
  });
}

std::string ProcessTable::KeepaliveEvent() {
  return EventJson([&](JsonWriter& w) {
    w.Key("keepalive");
    w.StartObject();
    w.EndObject();
  });
}

RpcError ProcessTable::NotFound(const ProcessSelector& which) {
  return {"not_found", which.pid ? "process with pid " + std::to_string(*which.pid) + " not found"
                                 : "process with tag '" + which.tag + "' not found"};
}

ProcessTable::EntryPtr ProcessTable::Find(const std::string& sandbox,
                                          const ProcessSelector& which) const {
  auto s = by_sandbox_.find(sandbox);
  if (s == by_sandbox_.end()) return nullptr;
  if (which.pid) {
    auto e = s->second.find(*which.pid);
    return e == s->second.end() ? nullptr : e->second;
  }
  for (const auto& [pid, e] : s->second) {
    if (e->tag && *e->tag == which.tag) return e;
  }
  return nullptr;
}

asio::awaitable<std::variant<WatcherPtr, RpcError>> ProcessTable::Start(
    const std::string& sandbox, const std::string& client, ProcessSpec spec, ProcessConfig config,
    std::optional<std::string> tag, std::chrono::milliseconds lifetime) {
  const asio::any_io_executor ex = co_await asio::this_coro::executor;
  const bool stdin_open = spec.stdin;
  auto started = co_await sessions_.Spawn(sandbox, client, std::move(spec));
  if (auto* e = std::get_if<ApiError>(&started)) co_return RpcErrorOf(*e);
  auto e = std::make_shared<Entry>(ex);
  e->sandbox = sandbox;
  e->client = client;
  e->process = std::move(std::get<std::unique_ptr<SandboxProcess>>(started));
  e->pid = e->process->pid();
  e->tag = std::move(tag);
  e->config = std::move(config);
  e->stdin_open = stdin_open;
  auto w = std::make_shared<ProcessWatcher>(ex);
  Queue(*w, StartEvent(e->pid));
  e->watchers.push_back(w);
  by_sandbox_[sandbox][e->pid] = e;
  asio::co_spawn(ex, Run(e), asio::detached);
  if (lifetime.count() > 0) asio::co_spawn(ex, KillAtLifetime(e, lifetime), asio::detached);
  co_return w;
}

asio::awaitable<void> ProcessTable::Run(EntryPtr e) {
  ProcessOutputSink sink = [e](StreamKind kind, std::string bytes) -> asio::awaitable<void> {
    std::string event = DataEvent(kind, bytes);
    for (const WatcherPtr& w : e->watchers) Queue(*w, event);
    co_return;
  };
  ProcessEnd end = co_await e->process->Wait(std::move(sink));
  e->ended = true;
  e->lifetime.cancel();
  const std::string event = EndEvent(end);
  for (const WatcherPtr& w : e->watchers) {
    Queue(*w, event);
    w->ended = true;
  }
  e->watchers.clear();
  auto s = by_sandbox_.find(e->sandbox);
  if (s != by_sandbox_.end()) {
    auto it = s->second.find(e->pid);
    if (it != s->second.end() && it->second == e) s->second.erase(it);
    if (s->second.empty()) by_sandbox_.erase(s);
  }
}

asio::awaitable<void> ProcessTable::KillAtLifetime(EntryPtr e, std::chrono::milliseconds lifetime) {
  boost::system::error_code ec;
  e->lifetime.expires_after(lifetime);
  co_await e->lifetime.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  if (ec || e->ended) co_return;
  spdlog::debug("e2b sandbox {}: process {} reached its lifetime ({} ms): killed",
                ShortId(e->sandbox), e->pid, lifetime.count());
  (void)co_await sessions_.Signal(e->sandbox, e->client, e->pid, SIGKILL);
}

std::variant<WatcherPtr, RpcError> ProcessTable::Connect(const std::string& sandbox,
                                                         const ProcessSelector& which) {
  EntryPtr e = Find(sandbox, which);
  if (!e || e->ended) return NotFound(which);
  auto w = std::make_shared<ProcessWatcher>(e->lifetime.get_executor());
  Queue(*w, StartEvent(e->pid));
  e->watchers.push_back(w);
  return w;
}

void ProcessTable::Unwatch(const WatcherPtr& w) {
  for (auto& [sandbox, entries] : by_sandbox_) {
    for (auto& [pid, e] : entries) std::erase(e->watchers, w);
  }
}

std::vector<ProcessInfo> ProcessTable::List(const std::string& sandbox) const {
  std::vector<ProcessInfo> out;
  auto s = by_sandbox_.find(sandbox);
  if (s == by_sandbox_.end()) return out;
  for (const auto& [pid, e] : s->second) out.push_back({pid, e->tag, e->config});
  return out;
}

asio::awaitable<std::optional<RpcError>> ProcessTable::SendInput(const std::string& sandbox,
                                                                 const ProcessSelector& which,
                                                                 std::string data) {
  EntryPtr e = Find(sandbox, which);
  if (!e) co_return NotFound(which);
  while (e->writing) co_await e->stdin_idle.Wait();  // one write at a time, in arrival order
  if (!e->stdin_open) {
    co_return RpcError{"failed_precondition",
                       "the process's stdin is closed, or it was started without stdin "
                       "(stdin: true in Start keeps it open)"};
  }
  e->writing = true;
  Status written = co_await e->process->WriteStdin(std::move(data));
  e->writing = false;
  e->stdin_idle.Notify();
  if (!written.ok()) co_return RpcError{"failed_precondition", written.message()};
  co_return std::nullopt;
}

std::optional<RpcError> ProcessTable::CloseStdin(const std::string& sandbox,
                                                 const ProcessSelector& which) {
  EntryPtr e = Find(sandbox, which);
  if (!e) return NotFound(which);
  if (e->stdin_open) e->process->CloseStdin();
  e->stdin_open = false;
  return std::nullopt;
}

asio::awaitable<std::optional<RpcError>> ProcessTable::Signal(const std::string& sandbox,
                                                              const std::string& client,
                                                              const ProcessSelector& which,
                                                              int signal) {
  EntryPtr e = Find(sandbox, which);
  if (!e) co_return NotFound(which);
  std::optional<ApiError> failed = co_await sessions_.Signal(sandbox, client, e->pid, signal);
  if (failed) co_return RpcErrorOf(*failed);
  co_return std::nullopt;
}

}  // namespace ci::daemon::e2b
