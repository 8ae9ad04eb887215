#include "daemon/http/sse.h"

#include <gtest/gtest.h>

namespace ci::daemon {
namespace {

TEST(Sse, FrameFormat) {
  EXPECT_EQ(SseFrame("result", R"({"a":1})"), "event: result\ndata: {\"a\":1}\n\n");
}

TEST(Sse, OutputDataEscapesNewlinesSoAFrameStaysOneLine) {
  std::string data = SseOutputData(false, "a\nb\"c");
  EXPECT_EQ(data, R"({"stream":"stdout","data":"a\nb\"c"})");
  EXPECT_EQ(SseOutputData(true, ""), R"({"stream":"stderr","data":""})");
}

}  // namespace
}  // namespace ci::daemon
