#include "agent/egress_relay.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ci::agent {
namespace {

constexpr size_t kRelayChunk = 64u << 10;

}  // namespace

std::string EgressRelay::Listen(uint32_t port) {
  Stop();
  if (port == 0 || port > 65535) return "bad port " + std::to_string(port);
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener_ < 0) return std::string("socket: ") + std::strerror(errno);
  // An earlier execution of a recycled container may have left the port in TIME_WAIT.
  int one = 1;
  ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener_, 128) != 0) {
    std::string why = "127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno);
    ::close(listener_);
    listener_ = -1;
    return why;
  }
  return "";
}

void EgressRelay::Stop() {
  if (listener_ >= 0) ::close(listener_);
  listener_ = -1;
  for (auto& [id, c] : conns_) ::close(c.fd);
  conns_.clear();
}

void EgressRelay::AddPollFds(std::vector<pollfd>* fds) const {
  if (listener_ >= 0) fds->push_back({listener_, POLLIN, 0});
  for (const auto& [id, c] : conns_) {
    short events = 0;
    if (!c.read_eof && c.unacked < kEgressWindow) events |= POLLIN;
    if (!c.pending.empty()) events |= POLLOUT;
    if (events != 0) fds->push_back({c.fd, events, 0});
  }
}

bool EgressRelay::Serve(const pollfd& p) {
  if (p.fd < 0) return false;
  if (p.fd == listener_) {
    Accept();
    return true;
  }
  for (auto& [id, c] : conns_) {
    if (c.fd != p.fd) continue;
    const uint32_t conn = id;
    // A connection that errs or ends is erased inside: nothing of it is used afterwards.
    if ((p.revents & POLLOUT) != 0 && !c.pending.empty()) {
      Write(conn, c);
      if (conns_.count(conn) == 0) return true;
    }
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !c.read_eof &&
        c.unacked < kEgressWindow) {
      Read(conn, conns_.at(conn));
    }
    return true;
  }
  return false;
}

void EgressRelay::Accept() {
  for (;;) {
    int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a connection reset before its accept
    if (conns_.size() >= kMaxConnections) {
      ::close(fd);
      continue;
    }
    const uint32_t id = next_id_++;
    conns_[id].fd = fd;
    send_(Msg::kEgressOpen, WithId(id));
  }
}

void EgressRelay::Read(uint32_t id, Conn& c) {
  char buf[kRelayChunk];
  const size_t room = std::min<size_t>(sizeof buf, kEgressWindow - c.unacked);
  ssize_t n = ::read(c.fd, buf, room);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n < 0) return Drop(id, true);
  if (n == 0) {
    c.read_eof = true;
    send_(Msg::kEgressEnd, WithId(id));
    return FinishIfDone(id);
  }
  c.unacked += static_cast<uint64_t>(n);
  send_(Msg::kEgressData, WithId(id, std::string_view(buf, static_cast<size_t>(n))));
}

void EgressRelay::Write(uint32_t id, Conn& c) {
  size_t written = 0;
  while (written < c.pending.size()) {
    ssize_t n = ::write(c.fd, c.pending.data() + written, c.pending.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) return Drop(id, true);  // EPIPE, a reset: the program is gone
    written += static_cast<size_t>(n);
  }
  c.pending.erase(0, written);
  if (written > 0) send_(Msg::kEgressAck, EncodeAck(id, static_cast<uint32_t>(written)));
  FinishIfDone(id);
}

void EgressRelay::FinishIfDone(uint32_t id) {
  Conn& c = conns_.at(id);
  if (!c.got_end || !c.pending.empty()) return;
  if (!c.shut) {
    ::shutdown(c.fd, SHUT_WR);
    c.shut = true;
  }
  if (c.read_eof) Drop(id, false);
}

void EgressRelay::Drop(uint32_t id, bool tell) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  ::close(it->second.fd);
  conns_.erase(it);
  if (tell) send_(Msg::kEgressClose, WithId(id));
}

bool EgressRelay::Handle(Msg type, std::string_view payload) {
  if (type == Msg::kEgressAck) {
    auto ack = DecodeAck(payload);
    if (!ack) return false;
    if (auto it = conns_.find(ack->first); it != conns_.end()) {
      it->second.unacked -= std::min<uint64_t>(ack->second, it->second.unacked);
    }
    return true;
  }
  auto split = SplitId(payload);
  if (!split) return false;
  auto it = conns_.find(split->first);
  if (it == conns_.end()) return true;  // closed here already; the daemon learns it
  Conn& c = it->second;
  switch (type) {
    case Msg::kEgressData:
      c.pending.append(split->second);
      Write(split->first, c);
      return true;
    case Msg::kEgressEnd:
      c.got_end = true;
      FinishIfDone(split->first);
      return true;
    case Msg::kEgressClose:
      Drop(split->first, false);
      return true;
    default:
      return false;
  }
}

}  // namespace ci::agent
