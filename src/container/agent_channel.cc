#include "container/agent_channel.h"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <deque>
#include <map>
#include <optional>

#include "agent/agent_wire.h"
#include "container/agent_egress.h"

namespace ci::container {
namespace {

using agent::Msg;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// An agent answers a start and a counters read at once (it bounds its fork server's answer
// itself, exec_agent.h) and a file write once the bytes are through. Past these it is taken for
// broken: the stream is closed, so the container ends rather than holding a request for ever.
constexpr auto kStartAnswerTimeout = 30s;
constexpr auto kWriteAnswerTimeout = 120s;

// A wake-up for one waiting coroutine: Notify cancels the wait. The daemon's I/O runs on one
// thread, so checking a condition and starting the wait cannot miss a Notify in between.
class Wake {
 public:
  explicit Wake(const asio::any_io_executor& ex) : timer_(ex) {}
  asio::awaitable<void> Until(Clock::time_point deadline) {
    timer_.expires_at(deadline);
    boost::system::error_code ec;
    co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  void Notify() { timer_.cancel(); }

 private:
  asio::steady_timer timer_;
};

struct ExecState {
  explicit ExecState(const asio::any_io_executor& ex) : wake(ex) {}
  std::deque<std::pair<ExecOutput, std::string>> output;
  std::optional<int> status;
  bool closed = false;                     // Close() was called: a pending Read fails
  bool started = false;                    // the agent forked it
  std::optional<std::string> not_started;  // why the agent could not start it
  // A file write's answer (empty, or why not), or a counters read's (the text).
  std::optional<std::string> answer;
  std::optional<agent::DirListing> listing;  // a kListDir's answer
  Wake wake;
};

class Channel;

class AgentExec final : public ExecStream {
 public:
  AgentExec(std::shared_ptr<Channel> channel, uint32_t id, std::shared_ptr<ExecState> state)
      : channel_(std::move(channel)), id_(id), state_(std::move(state)) {}
  ~AgentExec() override;

  asio::awaitable<Result<bool>> Read(const ExecOutputSink& sink) override;
  asio::awaitable<Status> WriteAll(std::string_view data) override;
  asio::awaitable<void> CloseStdin() override;
  void Close() override {
    state_->closed = true;
    state_->wake.Notify();
    Discard();
  }
  asio::awaitable<Result<std::optional<int>>> ExitCode() override { co_return state_->status; }
  bool finished() const override {
    return state_->status || state_->not_started || state_->closed || channel_ended();
  }

 private:
  bool channel_ended() const;
  // Nobody reads on: the agent need not hold the program's output to the window any more.
  void Discard();
  bool discarded_ = false;

  std::shared_ptr<Channel> channel_;
  uint32_t id_;
  std::shared_ptr<ExecState> state_;
};

class Channel final : public AgentChannel, public std::enable_shared_from_this<Channel> {
 public:
  Channel(asio::any_io_executor ex, std::string id, std::unique_ptr<AgentTransport> stream)
      : ex_(std::move(ex)),
        id_(std::move(id)),
        stream_(std::move(stream)),
        ready_wake_(ex_),
        recycle_wake_(ex_),
        listen_wake_(ex_) {}

  // The hello is answered by kReady once the agent serves: an agent attached to after its start
  // (a pod's) said its first kReady to nobody.
  void Start() {
    egress_ = std::make_shared<AgentEgress>(
        ex_, [weak = weak_from_this()](Msg type, std::string_view payload) {
          if (auto self = weak.lock()) self->Send(type, payload);
        });
    asio::co_spawn(ex_, ReadLoop(shared_from_this()), asio::detached);
    Send(Msg::kHello, agent::WithId(agent::kWireVersion));
  }

  asio::awaitable<Status> AwaitReady(std::chrono::milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    while (!ready_ && !ended_ && Clock::now() < deadline) co_await ready_wake_.Until(deadline);
    if (ready_) co_return Status();
    co_return Status::Error(Describe(ended_ ? "the container's agent ended before it served"
                                            : "the container's agent did not start in time"));
  }

  asio::awaitable<Result<std::shared_ptr<ExecStream>>> Exec(const std::vector<std::string>& cmd,
                                                            const std::vector<std::string>& env,
                                                            const std::string& cwd,
                                                            bool attach_stdin,
                                                            bool from_zygote) override {
    if (ended()) co_return Status::Gone(Describe("the container's agent is gone"));
    agent::ExecRequest req{next_id_++, attach_stdin, cwd, cmd, env, from_zygote};
    auto state = std::make_shared<ExecState>(ex_);
    execs_[req.id] = state;
    auto exec = std::make_shared<AgentExec>(shared_from_this(), req.id, state);
    Send(Msg::kExec, agent::EncodeExec(req));
    const auto deadline = Clock::now() + kStartAnswerTimeout;
    while (!state->started && !state->not_started && !ended() && Clock::now() < deadline) {
      co_await state->wake.Until(deadline);
    }
    if (state->not_started) co_return Status::Error(*state->not_started);
    if (!state->started) co_return Status::Gone(GoneOrSilent(kStartAnswerTimeout));
    co_return std::shared_ptr<ExecStream>(std::move(exec));
  }

  asio::awaitable<Status> WriteFiles(
      const std::string& dir,
      const std::vector<std::pair<std::string, std::string>>& files) override {
    if (ended()) co_return Status::Gone(Describe("the container's agent is gone"));
    agent::WriteFilesRequest req{next_id_++, dir, files};
    auto state = co_await Ask(req.id, Msg::kWriteFiles, agent::EncodeWriteFiles(req),
                              kWriteAnswerTimeout, &ExecState::answer);
    if (!state) co_return Status::Gone(GoneOrSilent(kWriteAnswerTimeout));
    if (!state->answer->empty()) co_return Status::Error(*state->answer);
    co_return Status();
  }

  asio::awaitable<std::optional<Result<std::string>>> ReadCounters(uint8_t extras) override {
    if (wire_version_ < agent::kWindowedWireVersion) co_return std::nullopt;
    if (ended()) co_return Status::Gone(Describe("the container's agent is gone"));
    const uint32_t id = next_id_++;
    auto state = co_await Ask(id, Msg::kReadCounters,
                              agent::WithId(id, std::string(1, static_cast<char>(extras))),
                              kStartAnswerTimeout, &ExecState::answer);
    if (!state) co_return Status::Gone(GoneOrSilent(kStartAnswerTimeout));
    co_return std::move(*state->answer);
  }

  asio::awaitable<std::optional<Result<std::vector<agent::DirEntry>>>> ListDir(
      const std::string& path) override {
    if (wire_version_ < agent::kWindowedWireVersion) co_return std::nullopt;
    if (ended()) co_return Status::Gone(Describe("the container's agent is gone"));
    const uint32_t id = next_id_++;
    auto state = co_await Ask(id, Msg::kListDir, agent::WithId(id, path), kStartAnswerTimeout,
                              &ExecState::listing);
    if (!state) co_return Status::Gone(GoneOrSilent(kStartAnswerTimeout));
    if (!state->listing->why.empty()) co_return Status::Error(state->listing->why);
    co_return std::move(state->listing->entries);
  }

  void StartZygote(const std::vector<std::string>& argv,
                   const std::vector<std::string>& env) override {
    Send(Msg::kZygote, agent::EncodeExec({0, false, "/", argv, env}));
    fork_server_ = true;
  }
  bool has_fork_server() const override { return fork_server_; }

  // A session's list travels even when empty (a space): the agent then still spares the
  // interpreter's and relays' sessions.
  void KillAll(const std::string* background) override {
    std::string list;
    if (background != nullptr) (list = " ") += *background;
    Send(Msg::kKillAll, list);
  }

  asio::awaitable<Status> Recycle(std::chrono::milliseconds timeout) override {
    if (ended_) co_return Status::Gone(Describe("the container's agent is gone"));
    recycled_.reset();
    Send(Msg::kRecycle, {});
    const auto deadline = Clock::now() + timeout;
    while (!recycled_ && !ended_ && Clock::now() < deadline) {
      co_await recycle_wake_.Until(deadline);
    }
    if (!recycled_) co_return Status::Error(Describe("the agent did not recycle the container"));
    if (!recycled_->empty()) co_return Status::Error("recycling the container: " + *recycled_);
    co_return Status();
  }

  asio::awaitable<Result<std::shared_ptr<InsideListener>>> ListenInside(
      uint16_t port, asio::any_io_executor serve) override {
    if (ended()) co_return Status::Gone(Describe("the container's agent is gone"));
    listening_.reset();
    listener_.reset();
    serve_ = std::move(serve);
    Send(Msg::kEgressListen, agent::WithId(port));
    const auto deadline = Clock::now() + kStartAnswerTimeout;
    while (!listening_ && !ended() && Clock::now() < deadline) {
      co_await listen_wake_.Until(deadline);
    }
    if (!listening_) co_return Status::Gone(GoneOrSilent(kStartAnswerTimeout));
    if (!listening_->empty()) {
      co_return Status::Error("the container's agent could not listen: " + *listening_);
    }
    co_return std::move(listener_);
  }

  void Close() override {
    if (closed_) return;
    closed_ = true;
    stream_->Close();
  }

  // For the execs: their frames, and forgetting them.
  void Send(Msg type, std::string_view payload) {
    if (ended_ || closed_) return;
    outbox_.push_back(agent::Frame(type, payload));
    if (!writing_) {
      writing_ = true;
      asio::co_spawn(ex_, WriteLoop(shared_from_this()), asio::detached);
    }
  }
  void Forget(uint32_t id) { execs_.erase(id); }
  // Sends request `id` and waits for its answer in `field` (or the end of the stream, or
  // `timeout`); null without an answer.
  template <typename T>
  asio::awaitable<std::shared_ptr<ExecState>> Ask(uint32_t id, Msg type, std::string payload,
                                                  Clock::duration timeout,
                                                  std::optional<T> ExecState::*field) {
    auto state = std::make_shared<ExecState>(ex_);
    execs_[id] = state;
    Send(type, payload);
    const auto deadline = Clock::now() + timeout;
    while (!((*state).*field) && !ended() && Clock::now() < deadline) {
      co_await state->wake.Until(deadline);
    }
    Forget(id);
    if (!((*state).*field)) state.reset();
    co_return state;
  }
  // `count` bytes of exec `id`'s output were taken by its reader (agent::kOutputWindow).
  void AckOutput(uint32_t id, uint32_t count) {
    if (wire_version_ >= agent::kWindowedWireVersion && !ended()) {
      Send(Msg::kOutputAck, agent::EncodeAck(id, count));
    }
  }
  bool ended() const override { return ended_ || closed_; }
  // Why a request got no answer: the stream ended, or the agent was silent past `timeout` (then
  // the stream is closed here: the agent ends and the container is removed, never recycled).
  std::string GoneOrSilent(std::chrono::seconds timeout) {
    if (ended()) return Describe("the container's agent is gone");
    spdlog::warn("agent {}: no answer within {} s; the container is given up", id_.substr(0, 12),
                 timeout.count());
    Close();
    return Describe("the container's agent did not answer within " +
                    std::to_string(timeout.count()) + " s");
  }
  std::string Describe(const std::string& what) const {
    std::string s = what + " (container " + id_.substr(0, 12) + ")";
    if (!last_words_.empty()) s += ": " + last_words_;
    return s;
  }

 private:
  static asio::awaitable<void> WriteLoop(std::shared_ptr<Channel> self) {
    while (!self->outbox_.empty() && !self->closed_) {
      std::string frame = std::move(self->outbox_.front());
      self->outbox_.pop_front();
      Status s = co_await self->stream_->WriteAll(frame);
      if (!s.ok()) {
        spdlog::debug("agent {}: write: {}", self->id_.substr(0, 12), s.message());
        break;
      }
    }
    self->outbox_.clear();
    self->writing_ = false;
  }

  static asio::awaitable<void> ReadLoop(std::shared_ptr<Channel> self) {
    const AgentTransport::Sink sink = [self](AgentTransport::Stream s, std::string_view bytes) {
      self->FromAgent(s, bytes);
    };
    while (co_await self->stream_->ReadSome(sink) && !self->bad_) {
    }
    self->End();
  }

  void FromAgent(AgentTransport::Stream s, std::string_view bytes) {
    if (s != AgentTransport::Stream::kStdout) {
      // The agent's own messages (what went wrong before it could serve); kept for the errors.
      last_words_.append(bytes);
      if (last_words_.size() > 4096) last_words_.erase(0, last_words_.size() - 4096);
      spdlog::debug("agent {}: {}", id_.substr(0, 12), bytes);
      return;
    }
    reader_.Feed(bytes);
    Msg type;
    std::string payload;
    while (reader_.Next(&type, &payload, &bad_)) Dispatch(type, payload);
  }

  void Dispatch(Msg type, const std::string& payload) {
    switch (type) {
      case Msg::kReady:
        if (auto split = agent::SplitId(payload)) wire_version_ = split->first;
        ready_ = true;
        ready_wake_.Notify();
        return;
      case Msg::kOutput:
        if (auto out = agent::DecodeOutput(payload)) {
          return Update(out->id, [&](ExecState& e) {
            e.output.emplace_back(out->stream == 1 ? ExecOutput::kStdout : ExecOutput::kStderr,
                                  std::string(out->bytes));
          });
        }
        break;
      case Msg::kExited:
        if (auto exited = agent::DecodeExited(payload)) {
          return Update(exited->first, [&](ExecState& e) { e.status = exited->second; });
        }
        break;
      case Msg::kStarted:
        if (auto split = agent::SplitId(payload); split && split->second.empty()) {
          return Update(split->first, [](ExecState& e) { e.started = true; });
        }
        break;
      case Msg::kNotStarted:
        if (auto split = agent::SplitId(payload)) {
          return Update(split->first, [&](ExecState& e) {
            e.not_started = "the agent could not start it: " + std::string(split->second);
          });
        }
        break;
      case Msg::kFilesWritten:
      case Msg::kCountersRead:
        if (auto split = agent::SplitId(payload)) {
          return Update(split->first, [&](ExecState& e) { e.answer = split->second; });
        }
        break;
      case Msg::kDirListed:
        if (auto listing = agent::DecodeDirListed(payload)) {
          return Update(listing->id, [&](ExecState& e) { e.listing = std::move(*listing); });
        }
        break;
      case Msg::kRecycled:
        if (!payload.empty()) {
          if (payload[0] == 1 && payload.size() > 1) {  // done, with a note
            spdlog::debug("{}: {}", id_.substr(0, 12), payload.substr(1));
          }
          recycled_ = payload[0] == 1 ? std::string() : payload.substr(1);
          if (recycled_->empty() && payload[0] != 1) recycled_ = "refused";
          recycle_wake_.Notify();
          return;
        }
        break;
      case Msg::kEgressListening:
        // The listener exists before any connection to it can be reported.
        listening_ = payload;
        if (payload.empty()) listener_ = egress_->NewListener(serve_);
        listen_wake_.Notify();
        return;
      case Msg::kEgressOpen:
      case Msg::kEgressData:
      case Msg::kEgressAck:
      case Msg::kEgressEnd:
      case Msg::kEgressClose:
        if (egress_->Dispatch(type, payload)) return;
        break;
      default:
        break;
    }
    bad_ = true;
    spdlog::error("agent {}: malformed frame (type {})", id_.substr(0, 12), static_cast<int>(type));
  }

  // What a frame says of exec `id` (one the daemon forgot already is ignored); its reader wakes.
  template <typename F>
  void Update(uint32_t id, F change) {
    auto it = execs_.find(id);
    if (it == execs_.end()) return;
    change(*it->second);
    it->second->wake.Notify();
  }

  // The stream ended: every waiter learns it.
  void End() {
    ended_ = true;
    ready_wake_.Notify();
    recycle_wake_.Notify();
    listen_wake_.Notify();
    egress_->End();
    for (auto& [id, state] : execs_) state->wake.Notify();
  }

  asio::any_io_executor ex_;
  std::string id_;
  std::unique_ptr<AgentTransport> stream_;
  Wake ready_wake_;
  Wake recycle_wake_;
  Wake listen_wake_;
  std::optional<std::string> listening_;  // kEgressListening: empty, or why not
  std::shared_ptr<InsideListener> listener_;
  asio::any_io_executor serve_;  // where the listener's connections are served
  std::shared_ptr<AgentEgress> egress_;
  agent::FrameReader reader_;
  bool bad_ = false;
  bool ready_ = false;
  uint32_t wire_version_ = 0;  // its kReady's
  bool ended_ = false;
  bool closed_ = false;
  bool writing_ = false;
  bool fork_server_ = false;
  std::deque<std::string> outbox_;
  std::optional<std::string> recycled_;  // empty: recycled; else why not
  std::string last_words_;
  uint32_t next_id_ = 1;
  std::map<uint32_t, std::shared_ptr<ExecState>> execs_;
};

AgentExec::~AgentExec() {
  Discard();
  channel_->Forget(id_);
}

void AgentExec::Discard() {
  if (discarded_ || state_->status) return;
  discarded_ = true;
  channel_->AckOutput(id_, agent::kOutputAckAll);
}

bool AgentExec::channel_ended() const { return channel_->ended(); }

asio::awaitable<Result<bool>> AgentExec::Read(const ExecOutputSink& sink) {
  for (;;) {
    if (!state_->output.empty()) {
      // One chunk per Read, as a stream read gives (callers may stop between reads).
      auto [kind, bytes] = std::move(state_->output.front());
      state_->output.pop_front();
      sink(kind, bytes);
      channel_->AckOutput(id_, static_cast<uint32_t>(bytes.size()));  // taken: the window moves
      co_return true;
    }
    if (state_->status) co_return false;
    if (state_->closed) co_return Status::Error("the exec's stream was closed");
    if (channel_->ended()) {
      co_return Status::Gone(channel_->Describe("the container's agent is gone"));
    }
    co_await state_->wake.Until(Clock::time_point::max());
  }
}

asio::awaitable<Status> AgentExec::WriteAll(std::string_view data) {
  if (channel_->ended())
    co_return Status::Gone(channel_->Describe("the container's agent is gone"));
  constexpr size_t kChunk = 64u << 10;
  for (size_t at = 0; at < data.size(); at += kChunk) {
    channel_->Send(Msg::kStdin, agent::WithId(id_, data.substr(at, kChunk)));
  }
  co_return Status();
}

asio::awaitable<void> AgentExec::CloseStdin() {
  channel_->Send(Msg::kStdinEnd, agent::WithId(id_));
  co_return;
}

}  // namespace

std::shared_ptr<AgentChannel> OpenAgentChannel(asio::any_io_executor ex, std::string container_id,
                                               std::unique_ptr<AgentTransport> stream) {
  auto channel =
      std::make_shared<Channel>(std::move(ex), std::move(container_id), std::move(stream));
  channel->Start();
  return channel;
}

}  // namespace ci::container
