// The daemon's end of a sandbox's agent (src/agent, PID 1 of containers and pods whose image
// carries one): its transport (a container's or pod's attach), its frames both ways, and the
// execs in flight over it. An exec here is what `docker exec` is to the Engine (same
// ExecStream), started by one frame.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent_wire.h"
#include "container/agent_transport.h"
#include "container/container_api.h"
#include "core/inside_listener.h"
#include "core/status.h"

namespace ci::container {

class AgentChannel {
 public:
  virtual ~AgentChannel() = default;
  // Until the agent said it serves; an error when it did not within `timeout` or its stream
  // ended (then its own last words are in the message).
  virtual asio::awaitable<Status> AwaitReady(std::chrono::milliseconds timeout) = 0;
  // Starts `cmd` with `env` over the container's in `cwd`; returns once the agent forked it, or
  // with the reason it could not (no free pid: the caller may make room and try again).
  // Status::Gone once the stream ended.
  // `from_zygote`: forked by the container's fork server (StartZygote), an error without one.
  virtual asio::awaitable<Result<std::shared_ptr<ExecStream>>> Exec(
      const std::vector<std::string>& cmd, const std::vector<std::string>& env,
      const std::string& cwd, bool attach_stdin, bool from_zygote = false) = 0;
  // Writes `files` ("name, content" pairs, top-level names) into `dir` through the agent itself,
  // without an exec (src/agent/write_files.h); the error names the file it could not write.
  virtual asio::awaitable<Status> WriteFiles(
      const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files) = 0;
  // The container's cgroup counters read by the agent itself (src/agent/counter_files.h: the
  // in-container probe's text, with agent::CounterExtras' sections); nullopt from an agent older
  // than that (agent::kWindowedWireVersion).
  virtual asio::awaitable<std::optional<Result<std::string>>> ReadCounters(uint8_t extras) = 0;
  // The first entries of the directory `path` (agent::kMaxListed), listed by the agent itself;
  // nullopt from an agent older than that.
  virtual asio::awaitable<std::optional<Result<std::vector<agent::DirEntry>>>> ListDir(
      const std::string& path) = 0;
  // Starts the container's Python fork server (src/agent/python_fork_server.h) with `env` over the
  // container's; the agent starts it again after each recycle that had to end it.
  virtual void StartZygote(const std::vector<std::string>& argv,
                           const std::vector<std::string>& env) = 0;
  // StartZygote was called: a recycled container holds the agent and the fork server.
  virtual bool has_fork_server() const = 0;
  // SIGKILL to every process of the container but the agent and, when given, the `background`
  // sessions (ContainerApi::KillAllBut); needs no free pid.
  virtual void KillAll(const std::string* background) = 0;
  // Ends every exec and empties the container's writable places (src/agent/recycle.h); ok when
  // the container is as it started.
  virtual asio::awaitable<Status> Recycle(std::chrono::milliseconds timeout) = 0;
  // Egress (docs/egress.md): connections the container's programs open to 127.0.0.1:`port`,
  // relayed by the agent (agent_egress.h) until the listener is closed or the container recycled.
  virtual asio::awaitable<Result<std::shared_ptr<InsideListener>>> ListenInside(
      uint16_t port, asio::any_io_executor serve) = 0;
  // Ends the stream: the agent kills everything and exits, so the container stops.
  virtual void Close() = 0;
  // The stream ended (the agent or its container is gone, or Close).
  virtual bool ended() const = 0;
};

// Starts reading `stream` (to and from the agent, PID 1 of the container or pod `container_id`)
// and says hello.
std::shared_ptr<AgentChannel> OpenAgentChannel(asio::any_io_executor ex, std::string container_id,
                                               std::unique_ptr<AgentTransport> stream);

}  // namespace ci::container
