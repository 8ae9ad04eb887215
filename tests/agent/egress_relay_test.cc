// The agent's egress relay (src/agent/egress_relay.{h,cc}) in the real binary, PID 1 of fresh
// pid, mount and IPC namespaces as in agent_test.cc, driven over pipes as the daemon drives it.
// The namespaces share the host's network: the agent listens on the host's loopback, at a port
// the kernel found free for each case, and the "programs" are this test's plain sockets.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agent/agent_as_init.h"
#include "agent/agent_wire.h"

namespace ci::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using ::testing::HasSubstr;

constexpr milliseconds kPatience{10'000};  // any one thing awaited
constexpr milliseconds kSilence{1'000};    // "nothing more comes"

// Bytes that show a loss, a duplicate or a reordering at any offset.
std::string Pattern(size_t size, uint32_t seed) {
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) {
    out[i] = static_cast<char>(((i + seed) * 2654435761u) >> 13);
  }
  return out;
}

int RemainingMs(steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

// A program's TCP client of the egress port: the fd, or -errno.
int Connect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    ::close(fd);
    return -e;
  }
  return fd;
}

// Reads `fd` into `got` until `size` bytes, EOF or an error, within kPatience. 0 at EOF (or
// with `size` bytes read), errno on an error, -1 at the deadline.
int ReadClient(int fd, size_t size, std::string* got) {
  const auto deadline = steady_clock::now() + kPatience;
  char buf[65536];
  while (got->size() < size) {
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, RemainingMs(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return -1;
    ssize_t n = ::recv(fd, buf, std::min(sizeof buf, size - got->size()), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return 0;
    got->append(buf, static_cast<size_t>(n));
  }
  return 0;
}

// What a client sees of its end: "eof", "reset", "data" (bytes came instead), or "nothing".
std::string ClientEnd(int fd) {
  std::string got;
  int r = ReadClient(fd, 1, &got);
  if (!got.empty()) return "data";
  if (r == 0) return "eof";
  if (r == ECONNRESET) return "reset";
  return r < 0 ? "nothing" : std::string("error ") + std::strerror(r);
}

// A loopback port the kernel just found free (a fixed one may be any other process's: the
// ephemeral range is shared with everything the machine connects).
uint16_t FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  uint16_t port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) ::close(fd);
  return port;
}

class EgressRelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "namespaces of its own need root";
    port_ = FreeLoopbackPort();
    ASSERT_NE(port_, 0);
    Start();
  }
  void TearDown() override {
    for (int fd : clients_) ::close(fd);
    if (pid_ > 0) {
      if (to_agent_ >= 0) ::close(to_agent_);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (from_agent_ >= 0) ::close(from_agent_);
  }

  void Start() {
    const AgentProcess agent = StartAgentAsInit({});
    ASSERT_GE(agent.pid, 0);
    pid_ = agent.pid;
    to_agent_ = agent.to_agent;
    from_agent_ = agent.from_agent;
    // Writes wait on the agent's answers being read: the agent's own writes block.
    ASSERT_EQ(::fcntl(to_agent_, F_SETFL, O_NONBLOCK), 0);
    Msg type;
    std::string payload;
    ASSERT_TRUE(Next(&type, &payload));
    ASSERT_EQ(type, Msg::kReady);
  }

  // One frame to the agent; what the agent says meanwhile is kept for Next.
  void Send(Msg type, std::string_view payload) {
    const std::string f = Frame(type, payload);
    std::string_view rest = f;
    const auto deadline = steady_clock::now() + kPatience;
    while (!rest.empty()) {
      ssize_t n = ::write(to_agent_, rest.data(), rest.size());
      if (n > 0) {
        rest.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      ASSERT_TRUE(n < 0 && (errno == EAGAIN || errno == EINTR)) << std::strerror(errno);
      ASSERT_GT(RemainingMs(deadline), 0) << "the agent reads no more";
      pollfd p[2] = {{to_agent_, POLLOUT, 0}, {from_agent_, POLLIN, 0}};
      if (::poll(p, 2, RemainingMs(deadline)) > 0 && (p[1].revents & POLLIN) != 0) Drain();
    }
  }

  // Whatever the agent wrote, into the reader; false at the end of its stream.
  bool Drain() {
    char buf[65536];
    ssize_t n = ::read(from_agent_, buf, sizeof buf);
    if (n <= 0) return false;
    reader_.Feed(std::string_view(buf, static_cast<size_t>(n)));
    return true;
  }

  // The next frame from the agent within `patience`.
  bool Next(Msg* type, std::string* payload, milliseconds patience = kPatience) {
    bool bad = false;
    const auto deadline = steady_clock::now() + patience;
    while (!reader_.Next(type, payload, &bad)) {
      if (bad || RemainingMs(deadline) == 0) return false;
      pollfd p{from_agent_, POLLIN, 0};
      if (::poll(&p, 1, RemainingMs(deadline)) <= 0) continue;
      if (!Drain()) return false;
    }
    return true;
  }

  std::string Listen(uint32_t port) {
    Send(Msg::kEgressListen, WithId(port));
    Msg type;
    std::string payload;
    if (!Next(&type, &payload)) return "no answer";
    if (type != Msg::kEgressListening) return "frame " + std::to_string(static_cast<int>(type));
    return payload;
  }

  // The next frame is kEgressOpen: its connection, 0 otherwise.
  uint32_t Opened() {
    Msg type;
    std::string payload;
    if (!Next(&type, &payload)) {
      ADD_FAILURE() << "no kEgressOpen";
      return 0;
    }
    auto conn = SplitId(payload);
    EXPECT_EQ(type, Msg::kEgressOpen);
    EXPECT_TRUE(conn && conn->second.empty());
    return type == Msg::kEgressOpen && conn ? conn->first : 0;
  }

  // A client connected and its kEgressOpen: {client fd, conn}.
  std::pair<int, uint32_t> Open() {
    int fd = Connect(port_);
    EXPECT_GE(fd, 0) << std::strerror(-fd);
    if (fd < 0) return {-1, 0};
    clients_.push_back(fd);
    return {fd, Opened()};
  }

  // The agent still serves, and said nothing before it answered (a kHello is answered in turn
  // with the frames before it).
  void ExpectOnlyReady() {
    Send(Msg::kHello, {});
    Msg type;
    std::string payload;
    ASSERT_TRUE(Next(&type, &payload)) << "the agent does not answer";
    EXPECT_EQ(type, Msg::kReady) << "frame " << static_cast<int>(type);
    EXPECT_EQ(payload, WithId(kWireVersion));
  }

  // Frames of `conn` until it sent `until` bytes of kEgressData and then kSilence passed, or
  // kPatience passed: the bytes. Each is acknowledged when `ack`. Any other frame fails.
  std::string Collect(uint32_t conn, size_t until, bool ack, std::string* data) {
    auto deadline = steady_clock::now() + kPatience;
    for (;;) {
      auto patience =
          data->size() >= until ? kSilence : milliseconds(std::max(RemainingMs(deadline), 1));
      Msg type;
      std::string payload;
      if (!Next(&type, &payload, patience)) return *data;
      auto split = SplitId(payload);
      if (type != Msg::kEgressData || !split || split->first != conn) {
        ADD_FAILURE() << "frame " << static_cast<int>(type) << " amid conn " << conn << "'s data";
        return *data;
      }
      data->append(split->second);
      if (ack) Send(Msg::kEgressAck, EncodeAck(conn, static_cast<uint32_t>(split->second.size())));
    }
  }

  // `bytes` to `conn` as the daemon sends them, never more than kEgressWindow unacknowledged;
  // returns once all were acknowledged (or kPatience passed): the sum of the acks.
  uint64_t SendAll(uint32_t conn, const std::string& bytes) {
    constexpr size_t kChunk = 48u << 10;
    uint64_t sent = 0, acked = 0;
    const auto deadline = steady_clock::now() + kPatience;
    while (acked < bytes.size() && RemainingMs(deadline) > 0) {
      while (sent < bytes.size() && sent - acked + kChunk <= kEgressWindow) {
        const size_t n = std::min<size_t>(kChunk, bytes.size() - sent);
        Send(Msg::kEgressData, WithId(conn, std::string_view(bytes).substr(sent, n)));
        sent += n;
      }
      Msg type;
      std::string payload;
      if (!Next(&type, &payload, milliseconds(std::max(RemainingMs(deadline), 1)))) break;
      auto ack = DecodeAck(payload);
      if (type != Msg::kEgressAck || !ack || ack->first != conn) {
        ADD_FAILURE() << "frame " << static_cast<int>(type) << " while sending to conn " << conn;
        break;
      }
      acked += ack->second;
      EXPECT_LE(acked, sent) << "more acknowledged than sent";
    }
    return acked;
  }

  pid_t pid_ = -1;
  int to_agent_ = -1, from_agent_ = -1;
  FrameReader reader_;
  uint16_t port_ = 0;
  std::vector<int> clients_;  // closed at the end
};

TEST_F(EgressRelayTest, ListenAnswersAndEachConnectionOpensWithANewId) {
  ASSERT_EQ(Listen(port_), "");
  auto [a, conn_a] = Open();
  auto [b, conn_b] = Open();
  EXPECT_NE(conn_a, 0u);
  EXPECT_NE(conn_b, 0u);
  EXPECT_NE(conn_a, conn_b);
  ExpectOnlyReady();

  // A port something else listens on: a reason, naming it.
  int taken = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(taken, 0);
  clients_.push_back(taken);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(taken, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(taken, 1), 0);
  ASSERT_EQ(::getsockname(taken, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const uint16_t taken_port = ntohs(addr.sin_port);
  const std::string why = Listen(taken_port);
  EXPECT_NE(why, "");
  EXPECT_THAT(why, HasSubstr(std::to_string(taken_port)));
  EXPECT_THAT(why, HasSubstr("in use"));
  EXPECT_NE(Listen(0), "");
  EXPECT_NE(Listen(70000), "");

  // And a free port again after the refusals.
  ASSERT_EQ(Listen(port_), "");
  auto [c, conn_c] = Open();
  EXPECT_NE(conn_c, 0u);
  EXPECT_NE(conn_c, conn_a);
  EXPECT_NE(conn_c, conn_b);
}

TEST_F(EgressRelayTest, BytesGoThroughWholeAndInOrderBothWaysAndAreAcknowledged) {
  ASSERT_EQ(Listen(port_), "");
  auto [client, conn] = Open();
  ASSERT_NE(conn, 0u);

  // The program's 1 MiB, acknowledged as it comes.
  const std::string up = Pattern(1u << 20, 1);
  std::thread writer([fd = client, &up] {
    for (size_t off = 0; off < up.size();) {
      ssize_t n = ::send(fd, up.data() + off, up.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  });
  std::string got;
  Collect(conn, up.size(), true, &got);
  writer.join();
  EXPECT_EQ(got.size(), up.size());
  EXPECT_TRUE(got == up) << "the program's bytes arrived changed";

  // The daemon's 1 MiB, read by the program as it comes.
  const std::string down = Pattern(1u << 20, 2);
  std::string read;
  int read_result = -2;
  std::thread reader([fd = client, &down, &read, &read_result] {
    read_result = ReadClient(fd, down.size(), &read);
  });
  const uint64_t acked = SendAll(conn, down);
  reader.join();
  EXPECT_EQ(read_result, 0);
  EXPECT_EQ(read.size(), down.size());
  EXPECT_TRUE(read == down) << "the daemon's bytes arrived changed";
  EXPECT_EQ(acked, down.size()) << "the agent acknowledges what it delivered";
  ExpectOnlyReady();
}

TEST_F(EgressRelayTest, AtMostAWindowIsInFlightUntilAcknowledged) {
  ASSERT_EQ(Listen(port_), "");
  auto [client, conn] = Open();
  ASSERT_NE(conn, 0u);
  const std::string up = Pattern(4u << 20, 3);
  std::atomic<bool> all_written{false};
  std::thread writer([fd = client, &up, &all_written] {
    for (size_t off = 0; off < up.size();) {
      ssize_t n = ::send(fd, up.data() + off, up.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
    all_written = true;
  });

  // No acks: the agent reads exactly a window (each read is bounded by what is left of it).
  std::string got;
  Collect(conn, kEgressWindow, false, &got);
  EXPECT_EQ(got.size(), kEgressWindow);
  // An ack of N lets exactly N more through (the program has plenty more to send).
  constexpr uint32_t kReleased = 100'000;
  Send(Msg::kEgressAck, EncodeAck(conn, kReleased));
  Collect(conn, kEgressWindow + kReleased, false, &got);
  EXPECT_EQ(got.size(), kEgressWindow + kReleased);
  // An ack for another connection changes nothing of this one.
  Send(Msg::kEgressAck, EncodeAck(conn + 1000, kEgressWindow));
  Collect(conn, kEgressWindow + kReleased, false, &got);
  EXPECT_EQ(got.size(), kEgressWindow + kReleased);

  // Everything outstanding acknowledged: the rest comes, whole and in order.
  Send(Msg::kEgressAck, EncodeAck(conn, kEgressWindow));
  Collect(conn, up.size(), true, &got);
  if (got.size() != up.size()) ::shutdown(client, SHUT_RDWR);  // frees the writer
  writer.join();
  EXPECT_TRUE(all_written);
  EXPECT_EQ(got.size(), up.size());
  EXPECT_TRUE(got == up) << "the program's bytes arrived changed";
}

// The program ends its side first (an HTTP/1.0 request), and still reads the answer.
TEST_F(EgressRelayTest, AProgramsHalfCloseIsAnEndAndTheAnswerStillReachesIt) {
  ASSERT_EQ(Listen(port_), "");
  auto [client, conn] = Open();
  ASSERT_NE(conn, 0u);
  ASSERT_EQ(::send(client, "request", 7, MSG_NOSIGNAL), 7);
  ASSERT_EQ(::shutdown(client, SHUT_WR), 0);
  std::string got;
  Msg type;
  std::string payload;
  for (;;) {
    ASSERT_TRUE(Next(&type, &payload)) << "no kEgressEnd";
    auto split = SplitId(payload);
    ASSERT_TRUE(split);
    ASSERT_EQ(split->first, conn);
    if (type != Msg::kEgressData) break;
    got.append(split->second);
    Send(Msg::kEgressAck, EncodeAck(conn, static_cast<uint32_t>(split->second.size())));
  }
  EXPECT_EQ(type, Msg::kEgressEnd);
  EXPECT_EQ(payload, WithId(conn));
  EXPECT_EQ(got, "request");

  Send(Msg::kEgressData, WithId(conn, "response"));
  ASSERT_TRUE(Next(&type, &payload));
  EXPECT_EQ(type, Msg::kEgressAck);
  EXPECT_EQ(payload, EncodeAck(conn, 8));
  std::string answer;
  EXPECT_EQ(ReadClient(client, 8, &answer), 0);
  EXPECT_EQ(answer, "response");

  // The daemon's end: the program reads its EOF, and the agent forgets the connection (data
  // for it now is neither written nor acknowledged nor refused with a kEgressClose).
  Send(Msg::kEgressEnd, WithId(conn));
  EXPECT_EQ(ClientEnd(client), "eof");
  Send(Msg::kEgressData, WithId(conn, "late"));
  Send(Msg::kEgressEnd, WithId(conn));
  ExpectOnlyReady();
}

// The daemon ends first (the proxy's upstream closed): the program reads what came before and
// EOF, and can still send.
TEST_F(EgressRelayTest, TheDaemonsHalfCloseLeavesTheProgramsSideOpen) {
  ASSERT_EQ(Listen(port_), "");
  auto [client, conn] = Open();
  ASSERT_NE(conn, 0u);
  // The program reads nothing yet: the daemon sends (within the window) until the agent holds
  // bytes the socket does not take, then ends. The end waits for those bytes.
  constexpr size_t kChunk = 64u << 10;
  std::string down;
  uint64_t acked = 0;
  Msg type;
  std::string payload;
  for (;;) {
    while (down.size() - acked + kChunk <= kEgressWindow && down.size() < (64u << 20)) {
      std::string piece = Pattern(kChunk, static_cast<uint32_t>(4 + down.size()));
      Send(Msg::kEgressData, WithId(conn, piece));
      down += piece;
    }
    if (!Next(&type, &payload, kSilence)) break;  // the agent's bytes stopped going out
    auto ack = DecodeAck(payload);
    ASSERT_EQ(type, Msg::kEgressAck);
    ASSERT_TRUE(ack && ack->first == conn);
    acked += ack->second;
  }
  ASSERT_LT(acked, down.size()) << "the agent holds nothing: the end would not wait for it";
  Send(Msg::kEgressEnd, WithId(conn));
  ExpectOnlyReady();  // the end was handled before the program reads anything
  std::string got;
  EXPECT_EQ(ReadClient(client, down.size() + 1, &got), 0);
  EXPECT_EQ(got.size(), down.size()) << "then EOF";
  EXPECT_TRUE(got == down) << "the daemon's bytes arrived changed";
  while (acked < down.size()) {
    ASSERT_TRUE(Next(&type, &payload)) << acked << " acknowledged";
    auto ack = DecodeAck(payload);
    ASSERT_EQ(type, Msg::kEgressAck);
    ASSERT_TRUE(ack && ack->first == conn);
    acked += ack->second;
  }
  EXPECT_EQ(acked, down.size());

  ASSERT_EQ(::send(client, "after", 5, MSG_NOSIGNAL), 5);
  ASSERT_TRUE(Next(&type, &payload));
  ASSERT_EQ(type, Msg::kEgressData);
  EXPECT_EQ(payload, WithId(conn, "after"));
  ASSERT_EQ(::shutdown(client, SHUT_WR), 0);
  ASSERT_TRUE(Next(&type, &payload));
  EXPECT_EQ(type, Msg::kEgressEnd);
  EXPECT_EQ(payload, WithId(conn));
  Send(Msg::kEgressData, WithId(conn, "late"));
  ExpectOnlyReady();
}

TEST_F(EgressRelayTest, ACloseEitherWayEndsTheOtherSide) {
  ASSERT_EQ(Listen(port_), "");
  // The daemon's reset: the program's socket is closed, and the agent says nothing more of it.
  auto [client, conn] = Open();
  ASSERT_NE(conn, 0u);
  Send(Msg::kEgressClose, WithId(conn));
  EXPECT_THAT(ClientEnd(client), ::testing::AnyOf("eof", "reset"));
  Send(Msg::kEgressData, WithId(conn, "late"));
  ExpectOnlyReady();

  // The program's reset (SO_LINGER 0: an RST, not a FIN).
  auto [abrupt, conn2] = Open();
  ASSERT_NE(conn2, 0u);
  linger hard{1, 0};
  ASSERT_EQ(::setsockopt(abrupt, SOL_SOCKET, SO_LINGER, &hard, sizeof hard), 0);
  ASSERT_EQ(::close(abrupt), 0);
  std::erase(clients_, abrupt);
  Msg type;
  std::string payload;
  ASSERT_TRUE(Next(&type, &payload)) << "the agent did not notice the reset";
  EXPECT_THAT(type, ::testing::AnyOf(Msg::kEgressClose, Msg::kEgressEnd))
      << "frame " << static_cast<int>(type);
  EXPECT_EQ(payload, WithId(conn2));
  ExpectOnlyReady();
}

// The agent keeps at most kMaxConnections (256) open: more are closed as they come, and a
// connection that ended makes room.
TEST_F(EgressRelayTest, AtMost256ConnectionsAreOpenAtOnce) {
  ASSERT_EQ(Listen(port_), "");
  std::vector<std::pair<int, uint32_t>> open;
  for (int i = 0; i < 256; ++i) {
    open.push_back(Open());
    ASSERT_NE(open.back().second, 0u) << i;
  }
  int extra = Connect(port_);
  ASSERT_GE(extra, 0) << std::strerror(-extra);
  clients_.push_back(extra);
  EXPECT_EQ(ClientEnd(extra), "eof") << "the 257th is closed at once";
  ExpectOnlyReady();  // and never announced

  // One ends both ways (its program closes, the daemon ends): room for one more.
  auto [first, conn] = open.front();
  ASSERT_EQ(::shutdown(first, SHUT_WR), 0);
  Msg type;
  std::string payload;
  ASSERT_TRUE(Next(&type, &payload));
  EXPECT_EQ(type, Msg::kEgressEnd);
  EXPECT_EQ(payload, WithId(conn));
  Send(Msg::kEgressEnd, WithId(conn));
  EXPECT_EQ(ClientEnd(first), "eof");
  EXPECT_NE(Open().second, 0u);
}

class EgressStopTest : public EgressRelayTest, public ::testing::WithParamInterface<Msg> {};

// kEgressStop, and a recycle (refused here: the test's root file system is writable, as in
// agent_test.cc, but the egress is stopped first whatever its answer).
TEST_P(EgressStopTest, EveryConnectionAndTheListenerClose) {
  ASSERT_EQ(Listen(port_), "");
  auto [a, conn_a] = Open();
  auto [b, conn_b] = Open();
  ASSERT_NE(conn_a, 0u);
  ASSERT_NE(conn_b, 0u);
  // One of them has bytes of the daemon's in hand, delivered before the stop.
  Send(Msg::kEgressData, WithId(conn_b, "partial"));
  Msg type;
  std::string payload;
  ASSERT_TRUE(Next(&type, &payload));
  EXPECT_EQ(type, Msg::kEgressAck);

  Send(GetParam(), {});
  if (GetParam() == Msg::kRecycle) {
    ASSERT_TRUE(Next(&type, &payload));
    EXPECT_EQ(type, Msg::kRecycled);
  }
  ExpectOnlyReady();  // the stop is done
  EXPECT_EQ(Connect(port_), -ECONNREFUSED);
  EXPECT_EQ(ClientEnd(a), "eof");
  std::string got;
  EXPECT_EQ(ReadClient(b, 100, &got), 0);
  EXPECT_EQ(got, "partial") << "then EOF";
  // Frames of the closed connections are ignored.
  Send(Msg::kEgressData, WithId(conn_a, "late"));
  Send(Msg::kEgressAck, EncodeAck(conn_b, 1));
  Send(Msg::kEgressEnd, WithId(conn_b));
  ExpectOnlyReady();

  // A listen afterwards serves again, with ids never used before.
  ASSERT_EQ(Listen(port_), "");
  auto [c, conn_c] = Open();
  EXPECT_NE(conn_c, 0u);
  EXPECT_NE(conn_c, conn_a);
  EXPECT_NE(conn_c, conn_b);
}

INSTANTIATE_TEST_SUITE_P(StopAndRecycle, EgressStopTest,
                         ::testing::Values(Msg::kEgressStop, Msg::kRecycle), [](const auto& info) {
                           return info.param == Msg::kEgressStop ? "Stop" : "Recycle";
                         });

}  // namespace
}  // namespace ci::agent
