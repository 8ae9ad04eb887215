// The agent's side of egress (docs/egress.md): a TCP listener on the container's loopback where
// the program's HTTP clients find the daemon's proxy, and each connection accepted there relayed
// over the daemon's stream as frames (agent_wire.h, kEgress*). The container keeps network
// `none`: the relay is its only way out, and the daemon's proxy decides what goes through.
// Each direction of a connection has at most kEgressWindow bytes unacknowledged in flight.
#pragma once

#include <poll.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/agent_wire.h"

namespace ci::agent {

class EgressRelay {
 public:
  using Send = std::function<bool(Msg, std::string_view)>;
  explicit EgressRelay(Send send) : send_(std::move(send)) {}
  ~EgressRelay() { Stop(); }
  EgressRelay(const EgressRelay&) = delete;
  EgressRelay& operator=(const EgressRelay&) = delete;

  // kEgressListen: empty once listening on 127.0.0.1:`port`, or why not.
  std::string Listen(uint32_t port);
  // kEgressStop, and every recycle: the listener and all connections close.
  void Stop();
  // Its descriptors, with what each waits for.
  void AddPollFds(std::vector<pollfd>* fds) const;
  // Serves `p` if it is one of its descriptors; false when it is not.
  bool Serve(const pollfd& p);
  // A frame of the daemon's about a connection (kEgressData, Ack, End, Close); false when
  // malformed.
  bool Handle(Msg type, std::string_view payload);

  // Connections open at once; more are closed as they come (the proxy has its own bound).
  static constexpr size_t kMaxConnections = 256;

 private:
  struct Conn {
    int fd = -1;
    std::string pending;    // from the daemon, not yet written to the program
    uint64_t unacked = 0;   // sent to the daemon, not yet acknowledged
    bool read_eof = false;  // the program's side ended (kEgressEnd sent)
    bool got_end = false;   // the daemon's side ended: shut down once `pending` is written
    bool shut = false;
  };
  void Accept();
  void Read(uint32_t id, Conn& c);
  void Write(uint32_t id, Conn& c);
  // Closes it when both sides ended and everything was written.
  void FinishIfDone(uint32_t id);
  void Drop(uint32_t id, bool tell);

  Send send_;
  int listener_ = -1;
  uint32_t next_id_ = 1;
  std::map<uint32_t, Conn> conns_;
};

}  // namespace ci::agent
