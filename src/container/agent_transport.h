// The byte stream between the daemon and an agent (src/agent), whatever carries it: what the
// daemon writes reaches the agent's stdin; what it reads is the agent's stdout (the wire's
// frames) and stderr (its own words), told apart. Docker's is a container's hijacked attach with
// its stdcopy frames; Kubernetes' a pod's attach WebSocket (k8s/attach_transport.h).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <memory>
#include <string_view>

#include "core/status.h"

namespace ci::container {

namespace asio = boost::asio;

class AgentTransport {
 public:
  enum class Stream { kStdout, kStderr };
  using Sink = std::function<void(Stream, std::string_view)>;

  virtual ~AgentTransport() = default;
  // Reads what arrives next into `sink` (any number of calls); false once the stream ended or
  // broke, or it carried something that is not the agent's output.
  virtual asio::awaitable<bool> ReadSome(const Sink& sink) = 0;
  virtual asio::awaitable<Status> WriteAll(std::string_view bytes) = 0;
  // Closes both directions at once; a pending ReadSome completes (false).
  virtual void Close() = 0;
};

}  // namespace ci::container
