#include "daemon/service/output_buffer.h"

#include <gtest/gtest.h>

namespace ci::daemon {
namespace {

TEST(CappedOutput, KeepsEverythingUnderTheCap) {
  CappedOutput out(100);
  out.Append("hello ");
  out.Append("world\n");
  EXPECT_FALSE(out.truncated());
  EXPECT_EQ(out.Text(), "hello world\n");
}

TEST(CappedOutput, ExactlyTheCapIsNotTruncated) {
  CappedOutput out(64);
  out.Append(std::string(64, 'x'));
  EXPECT_FALSE(out.truncated());
  EXPECT_EQ(out.Text(), std::string(64, 'x'));
}

TEST(CappedOutput, TruncatesToCapMinus32PlusMarker) {
  CappedOutput out(1000);
  for (int i = 0; i < 100; ++i) out.Append(std::string(50, 'x'));
  EXPECT_TRUE(out.truncated());
  EXPECT_EQ(out.total_bytes(), 5000u);
  EXPECT_EQ(out.Text(), std::string(968, 'x') + "\n...[truncated]");
}

TEST(CappedOutput, InvalidUtf8IsReplaced) {
  CappedOutput out(100);
  out.Append("\xff\xfeok");
  EXPECT_EQ(out.Text(), "\xEF\xBF\xBD\xEF\xBF\xBDok");
}

TEST(SanitizeUtf8, ValidTextIsUnchanged) {
  std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a é € 😀
  EXPECT_EQ(SanitizeUtf8(s), s);
}

TEST(SanitizeUtf8, RejectsOverlongSurrogatesAndTruncatedSequences) {
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong '/'
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(SanitizeUtf8("x\xE2\x82"), "x\xEF\xBF\xBD\xEF\xBF\xBD");  // cut at the end
}

TEST(Utf8Stream, HoldsBackASplitCharacter) {
  Utf8Stream s(1000);
  EXPECT_EQ(s.Push("a\xE2\x82"), "a");  // € split after two bytes
  EXPECT_EQ(s.Push("\xAC"
                   "b"),
            "\xE2\x82\xAC"
            "b");
  EXPECT_EQ(s.Flush(), "");
}

TEST(Utf8Stream, FlushReplacesAnUnfinishedCharacter) {
  Utf8Stream s(1000);
  EXPECT_EQ(s.Push("\xF0\x9F"), "");
  EXPECT_EQ(s.Flush(), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(Utf8Stream, DropsBytesBeyondTheCapWithoutMarker) {
  Utf8Stream s(5);
  EXPECT_EQ(s.Push("abc"), "abc");
  EXPECT_FALSE(s.truncated());
  EXPECT_EQ(s.Push("defgh"), "de");
  EXPECT_TRUE(s.truncated());
  EXPECT_EQ(s.Push("more"), "");
}

}  // namespace
}  // namespace ci::daemon
