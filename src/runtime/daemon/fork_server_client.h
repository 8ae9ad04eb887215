// The daemon's side of the fork server (zygote.h): starts `code-interpreter fork` and asks it
// for sandboxes. The zygote is the parent of each (no shim process): the handles are a shim's
// (the plan, "kill" and the report on the lifecycle socket) with pid 0, and the sandbox's
// programs run `python3 -c` in the interpreter the zygote loaded instead of starting one
// (src/runtime/README.md "Fork server").
#pragma once

#include <sys/types.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/daemon/shim_spawn.h"
#include "runtime/kernel/unique_fd.h"

namespace ci::runtime {

namespace asio = boost::asio;

// Used from one thread, the one running `ex` (the daemon's event loop): a request's answer is
// awaited, never blocked on.
class ForkServer {
 public:
  // Spawns `binary fork` with `env` (the sandboxes' environment: the interpreter's
  // os.environ) and waits until it has imported `modules` and compiled `sources` (60 s at most),
  // blocking: the daemon's start.
  static Result<std::unique_ptr<ForkServer>> Start(asio::any_io_executor ex,
                                                   const std::string& binary,
                                                   const std::vector<std::string>& env,
                                                   const std::vector<std::string>& modules,
                                                   const std::vector<std::string>& sources);
  // The same, awaited on the event loop: a restart while the daemon serves.
  static asio::awaitable<Result<std::unique_ptr<ForkServer>>> StartAsync(
      asio::any_io_executor ex, std::string binary, std::vector<std::string> env,
      std::vector<std::string> modules, std::vector<std::string> sources);
  // Ends the zygote: it exits once the last of its sandboxes is gone (2 s at most, then killed).
  ~ForkServer();

  // Whether it serves; false for good once it failed.
  bool Ready() const { return !failed_; }
  // The handles of a new sandbox the zygote is the parent of (pid 0: no shim), or why not (the
  // zygote then serves no more). Requests take turns: the answer to the one in flight is the
  // next message on the control socket.
  asio::awaitable<Result<ShimHandles>> NewSandbox();

 private:
  ForkServer(asio::any_io_executor ex, pid_t pid, UniqueFd control);
  // The zygote spawned and sent its modules and sources; its first word not awaited yet.
  static Result<std::unique_ptr<ForkServer>> Spawn(asio::any_io_executor ex,
                                                   const std::string& binary,
                                                   const std::vector<std::string>& env,
                                                   const std::vector<std::string>& modules,
                                                   const std::vector<std::string>& sources);
  // Its first word, readable now: ready, or why not (then it is killed, and failed).
  Status ReadFirstWord();
  Status NotReadyInTime();
  asio::awaitable<Result<ShimHandles>> Request();
  void Fail(const std::string& why);

  pid_t pid_;
  asio::posix::stream_descriptor control_;
  asio::steady_timer turn_;  // never expires: cancelled when the request in flight is answered
  bool busy_ = false;
  bool failed_ = false;
};

}  // namespace ci::runtime
