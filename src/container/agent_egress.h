// The daemon's side of an agent's egress relay (src/agent/egress_relay.h): each connection a
// program opened to the agent's listener becomes a unix socket pair here, one end for the proxy
// (InsideListener::Accept), the other pumped to and from the connection's frames, with at most
// kEgressWindow bytes unacknowledged in flight each way.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string_view>

#include "agent/agent_wire.h"
#include "core/inside_listener.h"

namespace ci::container {

class AgentEgress : public std::enable_shared_from_this<AgentEgress> {
 public:
  using SendFrame = std::function<void(agent::Msg, std::string_view)>;
  AgentEgress(boost::asio::any_io_executor ex, SendFrame send);

  // The listener for the connections the agent reports from now on (after its kEgressListening),
  // handed out as streams on `serve`; closing it sends kEgressStop. It lives on this object's
  // executor.
  std::shared_ptr<InsideListener> NewListener(boost::asio::any_io_executor serve);
  // A frame of the agent's about egress connections; false when malformed.
  bool Dispatch(agent::Msg type, std::string_view payload);
  // The agent's stream ended: every connection closes, Accept fails.
  void End();

  struct Conn;
  class Listener;

 private:
  void Open(uint32_t id);
  void Abort(uint32_t id, bool tell);
  void ForgetIfDone(uint32_t id);
  static boost::asio::awaitable<void> FromProxy(std::shared_ptr<AgentEgress> self, uint32_t id,
                                                std::shared_ptr<Conn> conn);
  static boost::asio::awaitable<void> ToProxy(std::shared_ptr<AgentEgress> self, uint32_t id,
                                              std::shared_ptr<Conn> conn);

  boost::asio::any_io_executor ex_;
  SendFrame send_;
  std::shared_ptr<Listener> listener_;
  std::map<uint32_t, std::shared_ptr<Conn>> conns_;
  bool ended_ = false;
};

}  // namespace ci::container
