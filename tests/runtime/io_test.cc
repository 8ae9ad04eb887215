// stdin, stdout, stderr and exit status through real sandboxes.
#include <gmock/gmock.h>

#include "sandbox_fixture.h"

namespace ci::testing_support {
namespace {

using namespace std::chrono_literals;

TEST_F(SandboxTest, StdinIsDeliveredThenEof) {
  RunPayload p = Shell("cat; echo done >&2; exit 3");
  p.stdin_data = "hello\nworld\n";
  Execution ex = Execute(DefaultSpec(), std::move(p));
  ASSERT_TRUE(ex.outcome && ex.outcome->ok()) << ex.outcome->status().message();
  EXPECT_EQ(ex.out, "hello\nworld\n");
  EXPECT_EQ(ex.err, "done\n");
  EXPECT_EQ((*ex.outcome)->exit_code, 3);
  EXPECT_FALSE((*ex.outcome)->signal.has_value());
}

TEST_F(SandboxTest, NoStdinMeansImmediateEof) {
  Execution ex = Execute(DefaultSpec(), Shell("cat; echo eof"));
  ASSERT_TRUE(ex.outcome && ex.outcome->ok());
  EXPECT_EQ(ex.out, "eof\n");
}

TEST_F(SandboxTest, OutputStreamsBeforeTheProgramEnds) {
  Execution ex =
      Execute(DefaultSpec(), Python("import time\nprint('first', flush=True)\ntime.sleep(0.3)\n"
                                    "print('second')"));
  ASSERT_TRUE(ex.outcome && ex.outcome->ok());
  EXPECT_EQ(ex.out, "first\nsecond\n");
  ASSERT_GE(ex.first_chunk_ms, 0);
  EXPECT_LE(ex.first_chunk_ms + 250, ex.run_ms);
}

TEST_F(SandboxTest, LargeOutputIsStreamedInBoundedChunks) {
  auto prepared = Await(executor_->Prepare(DefaultSpec()));
  ASSERT_TRUE(prepared.ok());
  auto sandbox = std::move(prepared.value());
  uint64_t total = 0;
  size_t biggest = 0;
  auto outcome = Await(
      sandbox->Run(Shell("head -c 200000000 /dev/zero"), [&](StreamKind, std::string_view chunk) {
        total += chunk.size();
        biggest = std::max(biggest, chunk.size());
      }));
  Await(sandbox->Destroy());
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(total, 200000000u);
  EXPECT_LE(biggest, 64u << 10);
}

TEST_F(SandboxTest, MissingProgramIsExit127) {
  Execution ex = Execute(DefaultSpec(), RunPayload{{"no-such-program"}, {}, {}, 5s});
  ASSERT_TRUE(ex.outcome && ex.outcome->ok());
  EXPECT_EQ((*ex.outcome)->exit_code, 127);
  EXPECT_THAT(ex.err, ::testing::HasSubstr("cannot execute no-such-program"));
}

}  // namespace
}  // namespace ci::testing_support
