// SandboxSpec -> plan JSON and the control messages survive a round trip.
#include "runtime/wire/plan.h"

#include <gtest/gtest.h>

#include "runtime/wire/messages.h"
#include "runtime/wire/protocol.h"

namespace ci::runtime {
namespace {

TEST(Plan, FromSpecRoundTrips) {
  SandboxSpec spec;
  spec.rootfs = "/srv/root";
  spec.limits.memory_bytes = 128u << 20;
  spec.limits.pids = 16;
  spec.limits.open_files = 512;
  spec.limits.queued_signals = 77;
  spec.limits.message_queue_bytes = 4096;
  spec.limits.locked_memory_bytes = 65536;
  const std::string bpf("\x06\x00\x00\x00\x00\x00\xff\x7f", 8);  // ret ALLOW: binary-safe
  Plan p = PlanFromSpec(spec, {1, "/sys/fs/cgroup"}, bpf);
  p.host_uids = {2000000, 100};
  p.host_gids = {3000000, 50};
  p.id_lock_dir = "/run/ids";
  Plan q;
  ASSERT_TRUE(DecodePlan(EncodePlan(p), &q));
  EXPECT_EQ(q.rootfs, "/srv/root");
  EXPECT_EQ(q.uid, 65532u);
  EXPECT_EQ(q.hostname, "sandbox");
  EXPECT_EQ(q.memory_bytes, 128u << 20);
  EXPECT_EQ(q.pids, 16u);
  EXPECT_EQ(q.workspace_bytes, spec.limits.workspace_bytes);
  EXPECT_EQ(q.seccomp_bpf, bpf);
  EXPECT_EQ(q.cgroup.version, 1);
  EXPECT_EQ(q.cgroup.root, "/sys/fs/cgroup");
  EXPECT_EQ(q.open_files, 512u);
  EXPECT_EQ(q.queued_signals, 77u);
  EXPECT_EQ(q.message_queue_bytes, 4096u);
  EXPECT_EQ(q.locked_memory_bytes, 65536u);
  EXPECT_EQ(q.host_uids.first, 2000000u);
  EXPECT_EQ(q.host_uids.count, 100u);
  EXPECT_EQ(q.host_gids.first, 3000000u);
  EXPECT_EQ(q.host_gids.count, 50u);
  EXPECT_EQ(q.id_lock_dir, "/run/ids");
}

TEST(Plan, RejectsIncompleteJson) {
  Plan p;
  EXPECT_FALSE(DecodePlan("{\"rootfs\":\"host\"}", &p));
  EXPECT_FALSE(DecodePlan("not json", &p));
}

TEST(Messages, RunRequestAndExitedRoundTrip) {
  proto::RunRequest r{{"python3", "-c", "print(1)"}, {"A=b"}, "/workspace", 3, true, true, ""};
  proto::RunRequest r2;
  ASSERT_TRUE(proto::Decode(proto::Encode(r), &r2));
  EXPECT_EQ(r2.argv, r.argv);
  EXPECT_EQ(r2.env, r.env);
  EXPECT_EQ(r2.cpu_time_sec, 3u);
  EXPECT_TRUE(r2.serves_calls);
  // A call needs no argv; anything else does.
  proto::RunRequest call{{}, {}, "/workspace", 3, false, false, "{\"code\":\"1\"}"};
  ASSERT_TRUE(proto::Decode(proto::Encode(call), &r2));
  EXPECT_EQ(r2.call, call.call);
  call.call.clear();
  EXPECT_FALSE(proto::Decode(proto::Encode(call), &r2));
  proto::Exited e{false, 0, 9, 12, 34, true, true};
  proto::Exited e2;
  ASSERT_TRUE(proto::Decode(proto::Encode(e), &e2));
  EXPECT_EQ(e2.signal, 9);
  EXPECT_TRUE(e2.killed);
  EXPECT_EQ(e2.max_rss_kb, 34u);
  EXPECT_TRUE(e2.no_server);
}

TEST(Protocol, HeaderRoundTripAndLimit) {
  unsigned char h[proto::kHeaderSize];
  proto::EncodeHeader(proto::Msg::kFileChunk, 65536, h);
  proto::Msg t;
  uint32_t len = 0;
  ASSERT_TRUE(proto::DecodeHeader(h, &t, &len));
  EXPECT_EQ(t, proto::Msg::kFileChunk);
  EXPECT_EQ(len, 65536u);
  proto::EncodeHeader(proto::Msg::kPlan, proto::kMaxPayload + 1, h);
  EXPECT_FALSE(proto::DecodeHeader(h, &t, &len));
}

}  // namespace
}  // namespace ci::runtime
