// The processes of E2B's sandboxes as envd's process.Process serves them (docs/e2b.md
// "Processes"): started in the sandbox by its runtime (core/executor.h SandboxProcess), kept
// here by sandbox and pid with their tag and config, and watched by any number of streams
// (Start's, Connect's), each its own queue of Connect messages. A process outlives the stream
// that started it, until it ends, its lifetime (Connect-Timeout-Ms) passes, or its sandbox ends.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/executor.h"
#include "daemon/sessions/session_manager.h"

namespace ci::daemon::e2b {

// What a process was started with, as List reports it.
struct ProcessConfig {
  std::string cmd;
  std::vector<std::string> args;
  std::map<std::string, std::string> envs;
  std::optional<std::string> cwd;
};

// A Connect error: its code (not_found, invalid_argument, ...) and message.
struct RpcError {
  std::string code;
  std::string message;
};

// The Connect error of a session's refusal (404/410 not_found, 429 resource_exhausted...).
RpcError RpcErrorOf(const ApiError& e);

// One stream's view of a process: the messages (ProcessEvent JSON) it has yet to send.
struct ProcessWatcher {
  explicit ProcessWatcher(const boost::asio::any_io_executor& ex) : wake(ex) {}
  std::deque<std::string> events;
  size_t bytes = 0;
  bool ended = false;               // the end event is the last one queued
  std::optional<RpcError> dropped;  // it fell too far behind: its stream ends with this
  boost::asio::steady_timer wake;   // cancelled when something is queued
};
using WatcherPtr = std::shared_ptr<ProcessWatcher>;

// The process a request names: by pid, or by the tag it was started with.
struct ProcessSelector {
  std::optional<uint32_t> pid;
  std::string tag;
};

struct ProcessInfo {
  uint32_t pid = 0;
  std::optional<std::string> tag;
  ProcessConfig config;
};

class ProcessTable {
 public:
  explicit ProcessTable(SessionManager& sessions) : sessions_(sessions) {}

  // Starts it in `sandbox` (a session of `client`) and returns the starting stream's watcher,
  // whose first event is the start (with the pid). A `lifetime` above zero kills it then.
  boost::asio::awaitable<std::variant<WatcherPtr, RpcError>> Start(
      const std::string& sandbox, const std::string& client, ProcessSpec spec, ProcessConfig config,
      std::optional<std::string> tag, std::chrono::milliseconds lifetime);
  // A new watcher of a running process (its start event first, then its output from now on).
  std::variant<WatcherPtr, RpcError> Connect(const std::string& sandbox,
                                             const ProcessSelector& which);
  void Unwatch(const WatcherPtr& w);
  std::vector<ProcessInfo> List(const std::string& sandbox) const;
  boost::asio::awaitable<std::optional<RpcError>> SendInput(const std::string& sandbox,
                                                            const ProcessSelector& which,
                                                            std::string data);
  std::optional<RpcError> CloseStdin(const std::string& sandbox, const ProcessSelector& which);
  boost::asio::awaitable<std::optional<RpcError>> Signal(const std::string& sandbox,
                                                         const std::string& client,
                                                         const ProcessSelector& which, int signal);

  // The events as Connect messages (process.ProcessEvent in a StartResponse/ConnectResponse).
  static std::string StartEvent(uint32_t pid);
  static std::string KeepaliveEvent();

 private:
  struct Entry;
  using EntryPtr = std::shared_ptr<Entry>;
  EntryPtr Find(const std::string& sandbox, const ProcessSelector& which) const;
  static RpcError NotFound(const ProcessSelector& which);
  boost::asio::awaitable<void> Run(EntryPtr e);
  boost::asio::awaitable<void> KillAtLifetime(EntryPtr e, std::chrono::milliseconds lifetime);
  void Publish(Entry& e, std::string event);

  SessionManager& sessions_;
  std::map<std::string, std::map<uint32_t, EntryPtr>> by_sandbox_;  // running processes
};

}  // namespace ci::daemon::e2b
