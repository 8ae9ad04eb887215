#include "container/agent_egress.h"

#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <string>
#include <vector>

namespace ci::container {

namespace asio = boost::asio;
using agent::Msg;
using Stream = InsideListener::Stream;
using boost::system::error_code;

namespace {

auto Quietly(error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }

}  // namespace

// One relayed connection: `local` is the daemon's end of the pair whose other end the proxy has.
struct AgentEgress::Conn {
  Conn(Stream s, const asio::any_io_executor& ex) : local(std::move(s)), credit(ex) {}
  Stream local;
  uint64_t in_flight = 0;  // sent to the agent, not acknowledged
  std::deque<std::string> to_proxy;
  bool writing = false;
  bool sent_end = false;   // the proxy's side ended (kEgressEnd sent)
  bool agent_end = false;  // the program's side ended: `local` shuts down once drained
  bool gone = false;
  asio::steady_timer credit;  // woken by acknowledgements
};

class AgentEgress::Listener final : public InsideListener {
 public:
  Listener(asio::any_io_executor ex, asio::any_io_executor serve, SendFrame send)
      : wake_(ex), serve_(std::move(serve)), send_(std::move(send)) {}

  asio::awaitable<Result<Stream>> Accept() override {
    while (ready_.empty() && !closed_) {
      wake_.expires_at(asio::steady_timer::time_point::max());
      error_code ec;
      co_await wake_.async_wait(Quietly(ec));
    }
    if (closed_) co_return Status::Error("egress: the listener is closed");
    Stream s = std::move(ready_.front());
    ready_.pop_front();
    co_return s;
  }
  void Close() override {
    if (closed_) return;
    closed_ = true;
    ready_.clear();
    wake_.cancel();
    send_(Msg::kEgressStop, {});
  }
  // The agent is gone: nothing to tell it.
  void End() {
    send_ = [](Msg, std::string_view) {};
    Close();
  }
  asio::any_io_executor executor() override { return wake_.get_executor(); }
  bool closed() const { return closed_; }
  // The proxy's end of a new connection's pair.
  void Push(int fd) {
    ready_.emplace_back(serve_, asio::generic::stream_protocol(AF_UNIX, 0), fd);
    wake_.cancel();
  }

 private:
  asio::steady_timer wake_;
  asio::any_io_executor serve_;
  SendFrame send_;
  std::deque<Stream> ready_;
  bool closed_ = false;
};

AgentEgress::AgentEgress(asio::any_io_executor ex, SendFrame send)
    : ex_(std::move(ex)), send_(std::move(send)) {}

std::shared_ptr<InsideListener> AgentEgress::NewListener(asio::any_io_executor serve) {
  if (listener_) listener_->End();  // replaced: the agent's Listen closed the old one itself
  listener_ = std::make_shared<Listener>(ex_, std::move(serve), send_);
  if (ended_) listener_->End();
  return listener_;
}

void AgentEgress::End() {
  ended_ = true;
  if (listener_) listener_->End();
  while (!conns_.empty()) Abort(conns_.begin()->first, false);
}

bool AgentEgress::Dispatch(Msg type, std::string_view payload) {
  if (type == Msg::kEgressAck) {
    auto ack = agent::DecodeAck(payload);
    if (!ack) return false;
    if (auto it = conns_.find(ack->first); it != conns_.end()) {
      Conn& c = *it->second;
      c.in_flight -= std::min<uint64_t>(ack->second, c.in_flight);
      c.credit.cancel();
    }
    return true;
  }
  auto split = agent::SplitId(payload);
  if (!split) return false;
  const uint32_t id = split->first;
  if (type == Msg::kEgressOpen) {
    Open(id);
    return true;
  }
  auto it = conns_.find(id);
  if (it == conns_.end()) return true;  // aborted here already; the agent was told
  std::shared_ptr<Conn> c = it->second;
  switch (type) {
    case Msg::kEgressData:
      c->to_proxy.emplace_back(split->second);
      if (!c->writing) {
        c->writing = true;
        asio::co_spawn(ex_, ToProxy(shared_from_this(), id, c), asio::detached);
      }
      return true;
    case Msg::kEgressEnd:
      c->agent_end = true;
      if (!c->writing) {
        error_code ec;
        c->local.shutdown(Stream::shutdown_send, ec);
        ForgetIfDone(id);
      }
      return true;
    case Msg::kEgressClose:
      Abort(id, false);
      return true;
    default:
      return false;
  }
}

void AgentEgress::Open(uint32_t id) {
  int pair[2];
  if (!listener_ || listener_->closed() || conns_.count(id) != 0 ||
      ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    send_(Msg::kEgressClose, agent::WithId(id));
    return;
  }
  const asio::generic::stream_protocol unix_stream(AF_UNIX, 0);
  auto c = std::make_shared<Conn>(Stream(ex_, unix_stream, pair[0]), ex_);
  conns_[id] = c;
  listener_->Push(pair[1]);
  asio::co_spawn(ex_, FromProxy(shared_from_this(), id, c), asio::detached);
}

void AgentEgress::Abort(uint32_t id, bool tell) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  c.gone = true;
  error_code ec;
  c.local.close(ec);
  c.credit.cancel();
  conns_.erase(it);
  if (tell) send_(Msg::kEgressClose, agent::WithId(id));
}

void AgentEgress::ForgetIfDone(uint32_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  const Conn& c = *it->second;
  if (c.sent_end && c.agent_end && !c.writing) Abort(id, false);
}

asio::awaitable<void> AgentEgress::FromProxy(std::shared_ptr<AgentEgress> self, uint32_t id,
                                             std::shared_ptr<Conn> c) {
  std::vector<char> buf(64u << 10);
  while (!c->gone) {
    if (c->in_flight >= agent::kEgressWindow) {
      c->credit.expires_at(asio::steady_timer::time_point::max());
      error_code ec;
      co_await c->credit.async_wait(Quietly(ec));
      continue;
    }
    const size_t room = std::min<size_t>(buf.size(), agent::kEgressWindow - c->in_flight);
    error_code ec;
    const size_t n = co_await c->local.async_read_some(asio::buffer(buf.data(), room), Quietly(ec));
    if (c->gone) break;
    if (ec == asio::error::eof) {
      c->sent_end = true;
      self->send_(Msg::kEgressEnd, agent::WithId(id));
      self->ForgetIfDone(id);
      break;
    }
    if (ec) {
      self->Abort(id, true);
      break;
    }
    c->in_flight += n;
    self->send_(Msg::kEgressData, agent::WithId(id, std::string_view(buf.data(), n)));
  }
}

asio::awaitable<void> AgentEgress::ToProxy(std::shared_ptr<AgentEgress> self, uint32_t id,
                                           std::shared_ptr<Conn> c) {
  while (!c->to_proxy.empty() && !c->gone) {
    std::string chunk = std::move(c->to_proxy.front());
    c->to_proxy.pop_front();
    error_code ec;
    co_await asio::async_write(c->local, asio::buffer(chunk), Quietly(ec));
    if (c->gone) co_return;
    if (ec) {
      self->Abort(id, true);
      co_return;
    }
    self->send_(Msg::kEgressAck, agent::EncodeAck(id, static_cast<uint32_t>(chunk.size())));
  }
  c->writing = false;
  if (c->agent_end && !c->gone) {
    error_code ec;
    c->local.shutdown(Stream::shutdown_send, ec);
    self->ForgetIfDone(id);
  }
}

}  // namespace ci::container
