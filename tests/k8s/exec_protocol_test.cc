#include "k8s/exec_protocol.h"

#include <gtest/gtest.h>

namespace ci::k8s {
namespace {

TEST(ExecRequestTarget, EscapesEveryArgvByteAndNamesTheStreams) {
  ExecTarget t{"ns-1", "pod-a", "runner", {"python3", "-c", "print('a b')&x=1\n/é"}, true};
  EXPECT_EQ(ExecRequestTarget(t),
            "/api/v1/namespaces/ns-1/pods/pod-a/exec?container=runner&command=python3&command=-c"
            "&command=print%28%27a%20b%27%29%26x%3D1%0A%2F%C3%A9&stdin=true&stdout=true"
            "&stderr=true&tty=false");
  t.stdin = false;
  t.command = {"true"};
  EXPECT_EQ(ExecRequestTarget(t),
            "/api/v1/namespaces/ns-1/pods/pod-a/exec?container=runner&command=true&stdin=false"
            "&stdout=true&stderr=true&tty=false");
}

TEST(ChannelMessages, CarryTheChannelInTheFirstByte) {
  EXPECT_EQ(StdinMessage("hi"), std::string("\0hi", 3));
  EXPECT_EQ(StdinMessage(""), std::string("\0", 1));
  EXPECT_EQ(CloseStdinMessage(), std::string("\xff\x00", 2));
  auto m = ParseChannelMessage(std::string("\x02oops", 5));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->channel, 2);
  EXPECT_EQ(m->payload, "oops");
  auto opened = ParseChannelMessage(std::string("\x01", 1));  // the server's "streams ready"
  ASSERT_TRUE(opened);
  EXPECT_EQ(opened->channel, 1);
  EXPECT_TRUE(opened->payload.empty());
  EXPECT_FALSE(ParseChannelMessage(""));
}

TEST(ExitCodeFromStatus, SuccessAndNonZeroExitCodes) {
  EXPECT_EQ(*ExitCodeFromStatus(R"({"metadata":{},"status":"Success"})"), 0);
  EXPECT_EQ(*ExitCodeFromStatus(
                R"({"metadata":{},"status":"Failure","message":"command terminated with )"
                R"(non-zero exit code: 3","reason":"NonZeroExitCode","details":{"causes":)"
                R"([{"reason":"Other","message":"x"},{"reason":"ExitCode","message":"3"}]}})"),
            3);
  EXPECT_EQ(*ExitCodeFromStatus(R"({"status":"Failure","reason":"NonZeroExitCode",)"
                                R"("details":{"causes":[{"reason":"ExitCode","message":"137"}]}})"),
            137);
}

TEST(ExitCodeFromStatus, InfrastructureFailuresAreErrors) {
  Result<int> r = ExitCodeFromStatus(
      R"({"status":"Failure","message":"error executing command in container: not found",)"
      R"("reason":"InternalError","code":500})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("error executing command in container"), std::string::npos);
  for (const char* bad : {R"({"status":"Failure","reason":"NonZeroExitCode"})",
                          R"({"status":"Failure","reason":"NonZeroExitCode","details":{"causes":)"
                          R"([{"reason":"ExitCode","message":"256"}]}})",
                          R"({"status":"Failure","reason":"NonZeroExitCode","details":{"causes":)"
                          R"([{"reason":"ExitCode","message":"-1"}]}})",
                          "not json", "[]"}) {
    EXPECT_FALSE(ExitCodeFromStatus(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace ci::k8s
