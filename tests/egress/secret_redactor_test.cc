// Masking secrets in a stream, every way it can be cut into reads, and decoding chunked bodies
// so their framing cannot split a value where the redactor would not see it.
#include "daemon/egress/secret_redactor.h"

#include <gtest/gtest.h>

#include "daemon/egress/chunked_decoder.h"

namespace ci::daemon {
namespace {

std::string Redact(std::vector<std::string> values, const std::vector<std::string_view>& reads) {
  SecretRedactor r(std::move(values));
  std::string out;
  for (std::string_view read : reads) out += r.Feed(read);
  return out + r.Finish();
}

TEST(SecretRedactor, ValuesAreMaskedWithTheirLength) {
  EXPECT_EQ(Redact({"sk-secret"}, {"a sk-secret b sk-secret"}), "a ********* b *********");
  EXPECT_EQ(Redact({"sk-secret"}, {"nothing here"}), "nothing here");
  EXPECT_EQ(Redact({}, {"passes", " as is"}), "passes as is");
  EXPECT_EQ(Redact({"abab"}, {"xababab"}), "x******");  // overlapping occurrences
  EXPECT_EQ(Redact({"long-secret", "sec"}, {"sec long-secret"}), "*** ***********");
}

TEST(SecretRedactor, AValueCutByEveryReadBoundaryIsStillMasked) {
  const std::string text = "head: Bearer sk-abcdef123 tail Bearer sk-abcdef123";
  const std::string want = "head: ******************* tail *******************";
  for (size_t a = 0; a <= text.size(); ++a) {
    for (size_t b = a; b <= text.size(); b += 3) {
      std::string_view t = text;
      EXPECT_EQ(Redact({"Bearer sk-abcdef123"}, {t.substr(0, a), t.substr(a, b - a), t.substr(b)}),
                want)
          << a << " " << b;
    }
  }
  // One byte at a time, with a masked value overlapping the next.
  std::vector<std::string_view> bytes;
  const std::string overlap = "zabababz";
  for (size_t i = 0; i < overlap.size(); ++i)
    bytes.push_back(std::string_view(overlap).substr(i, 1));
  EXPECT_EQ(Redact({"abab"}, bytes), "z******z");
}

TEST(ChunkedDecoder, DecodesAcrossReadsAndStopsAtTheEnd) {
  const std::string framed =
      "4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nT: x\r\n\r\n";
  for (size_t cut = 0; cut <= framed.size(); ++cut) {
    ChunkedDecoder d;
    std::string body;
    ASSERT_TRUE(d.Feed(std::string_view(framed).substr(0, cut), &body));
    ASSERT_TRUE(d.Feed(std::string_view(framed).substr(cut), &body));
    EXPECT_EQ(body, "Wikipedia in\r\n\r\nchunks.");
    EXPECT_TRUE(d.done());
  }
  ChunkedDecoder bad;
  std::string body;
  EXPECT_FALSE(bad.Feed("zz\r\n", &body));
  ChunkedDecoder no_crlf;
  EXPECT_FALSE(no_crlf.Feed("2\r\nabX\r\n", &body));
}

}  // namespace
}  // namespace ci::daemon
