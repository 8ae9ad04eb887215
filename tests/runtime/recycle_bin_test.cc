// The local recycle bin (src/runtime/daemon/recycle_bin.h): a sandbox goes only to the client
// whose program it ran last and to the same spec; dead and stale ones are handed back for
// removal; a full or closed bin refuses. Sandbox cores over socket pairs: no sandbox runs here.
#include "runtime/daemon/recycle_bin.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>

#include "runtime/daemon/local_sandbox.h"

namespace ci::runtime {
namespace {

class RecycleBinTest : public ::testing::Test {
 protected:
  // A core whose init is the other end of a socket pair (closing it is init's death).
  std::shared_ptr<SandboxCore> Core(const std::string& client, uint32_t memory_mb = 256) {
    int pair[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    ShimHandles h;
    h.pid = 0;
    h.service.reset(pair[0]);
    inits_.emplace_back(pair[1]);
    for (UniqueFd* fd : {&h.lifecycle, &h.stdin_w, &h.stdout_r, &h.stderr_r}) {
      fd->reset(::open("/dev/null", O_RDWR | O_CLOEXEC));
    }
    auto core = std::make_shared<SandboxCore>(io_.get_executor(), std::move(h));
    core->recycle.spec = Spec(memory_mb);
    core->recycle.client = client;
    return core;
  }
  static SandboxSpec Spec(uint32_t memory_mb) {
    SandboxSpec spec;
    spec.limits.memory_bytes = uint64_t{memory_mb} << 20;
    spec.client = "whoever";  // RecycleSpec leaves it out
    spec.prestart_argv = {"python3"};
    return RecycleSpec(spec);
  }

  boost::asio::io_context io_;
  std::vector<UniqueFd> inits_;
  std::vector<std::shared_ptr<SandboxCore>> stale_;
};

TEST_F(RecycleBinTest, GivesASandboxOnlyToItsClientAndSpec) {
  RecycleBin bin(4, std::chrono::seconds(60));
  auto alice = Core("alice");
  ASSERT_TRUE(bin.Put(alice));
  EXPECT_EQ(bin.Take(Spec(256), "bob", &stale_), nullptr);
  EXPECT_EQ(bin.Take(Spec(128), "alice", &stale_), nullptr);
  EXPECT_EQ(bin.Take(Spec(256), "alice", &stale_), alice);
  EXPECT_EQ(bin.size(), 0u);
  EXPECT_TRUE(stale_.empty());
}

TEST_F(RecycleBinTest, HandsBackTheDeadAndTheStale) {
  RecycleBin bin(4, std::chrono::seconds(0));
  auto dead = Core("alice");
  inits_.back().reset();  // init ended
  ASSERT_TRUE(bin.Put(dead));
  EXPECT_EQ(bin.Take(Spec(256), "alice", &stale_), nullptr);
  ASSERT_EQ(stale_.size(), 1u);
  EXPECT_EQ(stale_[0], dead);
  ASSERT_TRUE(bin.Put(Core("alice")));
  ::usleep(1100 * 1000);  // idle longer than the bin keeps any (0 s)
  EXPECT_EQ(bin.Take(Spec(256), "alice", &stale_), nullptr);
  EXPECT_EQ(stale_.size(), 2u);
  EXPECT_EQ(bin.size(), 0u);
}

TEST_F(RecycleBinTest, RefusesWhenFullOrClosed) {
  RecycleBin bin(1, std::chrono::seconds(60));
  ASSERT_TRUE(bin.Put(Core("alice")));
  EXPECT_FALSE(bin.Put(Core("alice")));
  EXPECT_EQ(bin.Close().size(), 1u);
  EXPECT_FALSE(bin.Put(Core("alice")));
  EXPECT_EQ(bin.size(), 0u);
}

}  // namespace
}  // namespace ci::runtime
