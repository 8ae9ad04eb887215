#include "daemon/http/multipart.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ci::daemon {
namespace {

struct Part {
  MultipartPartHeaders headers;
  std::string data;
  bool ended = false;
  size_t data_calls = 0;
};

// Feeds `body` in chunks of `chunk` bytes and records what the callbacks saw.
struct Recorder {
  std::vector<Part> parts;
  MultipartParser parser;

  explicit Recorder(std::string boundary)
      : parser(std::move(boundary), MultipartParser::Callbacks{
                                        .on_part_begin =
                                            [this](const MultipartPartHeaders& h) {
                                              parts.emplace_back();
                                              parts.back().headers = h;
                                              return Status();
                                            },
                                        .on_part_data =
                                            [this](std::string_view d) {
                                              EXPECT_FALSE(d.empty());
                                              EXPECT_FALSE(parts.back().ended);
                                              parts.back().data.append(d);
                                              ++parts.back().data_calls;
                                              return Status();
                                            },
                                        .on_part_end =
                                            [this]() {
                                              parts.back().ended = true;
                                              return Status();
                                            },
                                    }) {}

  Status FeedAll(std::string_view body, size_t chunk) {
    for (size_t i = 0; i < body.size(); i += chunk) {
      if (Status s = parser.Feed(body.substr(i, chunk)); !s.ok()) return s;
    }
    return parser.Finish();
  }
};

const std::string kTwoParts =
    "--XyZ\r\n"
    "Content-Disposition: form-data; name=\"purpose\"\r\n"
    "\r\n"
    "assistants\r\n"
    "--XyZ\r\n"
    "content-disposition: form-data; name=\"file\"; filename=\"a b.txt\"\r\n"
    "CONTENT-TYPE: text/plain\r\n"
    "\r\n"
    "line one\r\nline two\r\n-- not a boundary\r\n--XyZnope\r\n\r\n"
    "\r\n--XyZ--\r\n"
    "epilogue is ignored --XyZ garbage";

void ExpectTwoParts(const std::vector<Part>& parts) {
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].headers.name, "purpose");
  EXPECT_FALSE(parts[0].headers.filename.has_value());
  EXPECT_EQ(parts[0].headers.content_type, "");
  EXPECT_EQ(parts[0].data, "assistants");
  EXPECT_TRUE(parts[0].ended);
  EXPECT_EQ(parts[1].headers.name, "file");
  EXPECT_EQ(parts[1].headers.filename, "a b.txt");
  EXPECT_EQ(parts[1].headers.content_type, "text/plain");
  EXPECT_EQ(parts[1].data, "line one\r\nline two\r\n-- not a boundary\r\n--XyZnope\r\n\r\n");
  EXPECT_TRUE(parts[1].ended);
}

TEST(MultipartTest, ParsesTwoPartsInEveryChunkSize) {
  for (size_t chunk = 1; chunk <= kTwoParts.size(); ++chunk) {
    SCOPED_TRACE("chunk size " + std::to_string(chunk));
    Recorder r("XyZ");
    ASSERT_TRUE(r.FeedAll(kTwoParts, chunk).ok());
    EXPECT_TRUE(r.parser.done());
    ExpectTwoParts(r.parts);
  }
}

TEST(MultipartTest, BoundarySplitAtEveryPosition) {
  // Two feeds, cut at every offset, so every piece of every delimiter straddles a chunk edge.
  for (size_t cut = 0; cut <= kTwoParts.size(); ++cut) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    Recorder r("XyZ");
    ASSERT_TRUE(r.parser.Feed(std::string_view(kTwoParts).substr(0, cut)).ok());
    ASSERT_TRUE(r.parser.Feed(std::string_view(kTwoParts).substr(cut)).ok());
    ASSERT_TRUE(r.parser.Finish().ok());
    ExpectTwoParts(r.parts);
  }
}

TEST(MultipartTest, StreamsLargePartsWithoutBufferingThem) {
  std::string payload;
  for (int i = 0; payload.size() < (1 << 20); ++i) payload += "\r\n-" + std::to_string(i) + "\r";
  std::string body = "--b\r\nContent-Disposition: form-data; name=file; filename=x\r\n\r\n" +
                     payload + "\r\n--b--";
  Recorder r("b");
  ASSERT_TRUE(r.FeedAll(body, 4096).ok());
  ASSERT_EQ(r.parts.size(), 1u);
  EXPECT_EQ(r.parts[0].data, payload);
  // Data is handed on per chunk, not held until the part ends.
  EXPECT_GE(r.parts[0].data_calls, payload.size() / 4096);
}

TEST(MultipartTest, PreambleAndTransportPadding) {
  std::string body =
      "This is a preamble.\r\n--b\r\n--b \t\r\n"  // "--b\r\n--b" inside: the second is real
      "Content-Disposition: form-data; name=a\r\n\r\nA\r\n--b  \r\n"
      "Content-Disposition: form-data; name=b\r\n\r\n\r\n--b--";
  for (size_t chunk : {1u, 3u, 1000u}) {
    Recorder r("b");
    Status s = r.FeedAll(body, chunk);
    // "--b\r\n" followed directly by "--b \t\r\n" means the first part's headers are the
    // line "--b \t", which has no colon.
    EXPECT_EQ(s.ok() ? "" : s.message(), "Invalid multipart body: malformed part header line");
  }
  std::string good =
      "preamble --b not at line start\r\n--b \t\r\n"
      "Content-Disposition: form-data; name=a\r\n\r\nA\r\n--b  \r\n"
      "Content-Disposition: form-data; name=b\r\n\r\n\r\n--b--";
  for (size_t chunk : {1u, 3u, 1000u}) {
    Recorder r("b");
    ASSERT_TRUE(r.FeedAll(good, chunk).ok());
    ASSERT_EQ(r.parts.size(), 2u);
    EXPECT_EQ(r.parts[0].data, "A");
    EXPECT_EQ(r.parts[1].headers.name, "b");
    EXPECT_EQ(r.parts[1].data, "");
    EXPECT_EQ(r.parts[1].data_calls, 0u);
    EXPECT_TRUE(r.parts[1].ended);
  }
}

TEST(MultipartTest, CrlfEdgeCases) {
  // Data that ends in CR, or consists of CRLFs, next to the delimiter.
  std::string body =
      "--b\r\nContent-Disposition: form-data; name=a\r\n\r\n\r\r\n--b\r\n"
      "Content-Disposition: form-data; name=b\r\n\r\n\r\n\r\n\r\n--b\r\n"
      "Content-Disposition: form-data; name=c\r\n\r\n\r\n-\r\n--\r\n--b--";
  for (size_t chunk = 1; chunk < 8; ++chunk) {
    Recorder r("b");
    ASSERT_TRUE(r.FeedAll(body, chunk).ok());
    ASSERT_EQ(r.parts.size(), 3u);
    EXPECT_EQ(r.parts[0].data, "\r");
    EXPECT_EQ(r.parts[1].data, "\r\n\r\n");
    EXPECT_EQ(r.parts[2].data, "\r\n-\r\n--");
  }
}

TEST(MultipartTest, ClosingBoundaryWithoutTrailingCrlfAndEmptyBody) {
  Recorder r("b");
  ASSERT_TRUE(r.FeedAll("--b\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--b--", 1).ok());
  EXPECT_EQ(r.parts.size(), 1u);

  Recorder empty("b");
  ASSERT_TRUE(empty.FeedAll("--b--\r\n", 2).ok());
  EXPECT_TRUE(empty.parts.empty());
  // Feeding after the end is harmless: it is epilogue.
  EXPECT_TRUE(empty.parser.Feed("--b\r\n").ok());
}

TEST(MultipartTest, MissingClosingBoundary) {
  for (std::string body : {"", "--b\r\nContent-Disposition: form-data; name=a\r\n\r\nxyz",
                           "--b\r\nContent-Disposition: form-data; name=a\r\n\r\nxyz\r\n--b",
                           "--b\r\nContent-Disposition: form-data; name=a\r\n\r\nxyz\r\n--b-",
                           "--b\r\nContent-Disposition: form-data; name=a", "no boundary at all"}) {
    SCOPED_TRACE(body);
    Recorder r("b");
    Status s = r.FeedAll(body, 1);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.message(), "Invalid multipart body: missing closing boundary");
    EXPECT_FALSE(r.parser.done());
    for (const Part& p : r.parts) EXPECT_FALSE(p.ended);
  }
}

TEST(MultipartTest, MalformedBodies) {
  struct Case {
    std::string body;
    std::string error;
  };
  const std::string kCd = "Content-Disposition: form-data; name=a\r\n";
  for (const Case& c : std::vector<Case>{

           {"--b\r\n\r\n", "part without a Content-Disposition header"},
           {"--b\r\nContent-Type: text/plain\r\n\r\n", "part without a Content-Disposition header"},
           {"--b\r\nContent-Disposition: attachment; name=a\r\n\r\n",
            "Content-Disposition of a part is not form-data"},
           {"--b\r\nContent-Disposition: form-data; filename=a\r\n\r\n", "part without a name"},
           {"--b\r\nContent-Disposition: form-data; name=\"a\r\n\r\n",
            "unterminated quoted string in Content-Disposition"},
           {"--b\r\nContent-Disposition: form-data; name\r\n\r\n",
            "malformed parameter in Content-Disposition"},
           {"--b\r\nContent-Disposition: form-data; name=\"a\"x\r\n\r\n",
            "malformed parameter in Content-Disposition"},
           {"--b\r\nno colon here\r\n\r\n", "malformed part header line"},
           {"--b\r\n: empty name\r\n\r\n", "malformed part header line"},
           {"--b\r\n folded first\r\n\r\n", "malformed part header line"},
           {"--b\r\n" + kCd + "X: a\nb\r\n\r\n", "bare CR or LF in part headers"},
       }) {
    for (size_t chunk : {1u, 100u}) {
      SCOPED_TRACE(c.body);
      Recorder r("b");
      Status s = r.FeedAll(c.body + "\r\n--b--", chunk);
      ASSERT_FALSE(s.ok());
      EXPECT_EQ(s.message(), "Invalid multipart body: " + c.error);
      // The parser stays failed.
      Status again = r.parser.Feed("x");
      EXPECT_EQ(again.ok() ? "" : again.message(), s.message());
    }
  }
}

TEST(MultipartTest, BoundaryLineWithTrailingGarbageIsData) {
  // As in python-multipart: "--b" must be followed by "--" or (padding and) CRLF to count.
  const std::string kCd = "--b\r\nContent-Disposition: form-data; name=a\r\n\r\n";
  const std::string padding(MultipartParser::kMaxPadding + 1, ' ');
  for (const std::string& data :
       {std::string("\r\n--bx"), std::string("x\r\n--b-x"), std::string("\r\n--b\rx"),
        std::string("\r\n--b \r\r"), std::string("\r\n--b\r\r\n--bc"), std::string("\r\n--b\t-"),
        "\r\n--b" + padding + "\r\n", std::string("\r\n--b\r")}) {
    for (size_t chunk : {1u, 2u, 5u, 1000u}) {
      SCOPED_TRACE(testing::PrintToString(data) + " in chunks of " + std::to_string(chunk));
      Recorder r("b");
      Status s = r.FeedAll(kCd + data + "\r\n--b--", chunk);
      ASSERT_TRUE(s.ok()) << s.message();
      ASSERT_EQ(r.parts.size(), 1u);
      EXPECT_EQ(r.parts[0].data, data);
      EXPECT_TRUE(r.parts[0].ended);
    }
  }
  // In the preamble such lines are skipped like any other.
  Recorder r("b");
  ASSERT_TRUE(r.FeedAll("--bx\r\n--b-\r\n--b\r\r\n--b\r\n"
                        "Content-Disposition: form-data; name=a\r\n\r\nA\r\n--b--",
                        1)
                  .ok());
  ASSERT_EQ(r.parts.size(), 1u);
  EXPECT_EQ(r.parts[0].data, "A");
}

TEST(MultipartTest, HeaderSizeIsBounded) {
  std::string filler = "X-Filler: " + std::string(MultipartParser::kMaxHeaderBytes, 'f') + "\r\n";
  std::string body =
      "--b\r\nContent-Disposition: form-data; name=a\r\n" + filler + "\r\nx\r\n--b--";
  Recorder r("b");
  Status s = r.FeedAll(body, 1000);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "Invalid multipart body: part headers exceed 16384 bytes");
  EXPECT_TRUE(r.parts.empty());

  // An endless header line is refused without reading it all.
  Recorder endless("b");
  ASSERT_TRUE(endless.parser.Feed("--b\r\nX: ").ok());
  Status e;
  size_t fed = 0;
  while (e.ok() && fed < 10 * MultipartParser::kMaxHeaderBytes) {
    e = endless.parser.Feed(std::string(100, 'y'));
    fed += 100;
  }
  ASSERT_FALSE(e.ok());
  EXPECT_LE(fed, MultipartParser::kMaxHeaderBytes + 100);

  // Exactly at the limit is fine.
  std::string cd = "Content-Disposition: form-data; name=a";
  std::string pad = "\r\nX: ";
  std::string exact =
      cd + pad + std::string(MultipartParser::kMaxHeaderBytes - cd.size() - pad.size(), 'p');
  ASSERT_EQ(exact.size(), MultipartParser::kMaxHeaderBytes);
  Recorder ok("b");
  EXPECT_TRUE(ok.FeedAll("--b\r\n" + exact + "\r\n\r\nx\r\n--b--", 7).ok());
  EXPECT_EQ(ok.parts.size(), 1u);
}

MultipartPartHeaders HeadersOf(const std::string& disposition) {
  Recorder r("b");
  Status s = r.FeedAll("--b\r\nContent-Disposition: " + disposition + "\r\n\r\n\r\n--b--", 5);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(r.parts.size(), 1u);
  return r.parts.empty() ? MultipartPartHeaders{} : r.parts[0].headers;
}

TEST(MultipartTest, ContentDispositionParameters) {
  MultipartPartHeaders h = HeadersOf(R"(form-data; name="file"; filename="a \"q\" \\ b;c.txt")");
  EXPECT_EQ(h.name, "file");
  EXPECT_EQ(h.filename, R"(a "q" \ b;c.txt)");

  h = HeadersOf("Form-Data ;NAME=file ; FileName = plain.txt ;");
  EXPECT_EQ(h.name, "file");
  EXPECT_EQ(h.filename, "plain.txt");

  h = HeadersOf(R"(form-data; name="file"; filename="")");
  EXPECT_EQ(h.filename, "");  // present but empty: the store names it "unnamed"

  h = HeadersOf("form-data; name=\"f\"; filename=\"\xc3\xa9t\xc3\xa9.txt\"");  // raw UTF-8
  EXPECT_EQ(h.filename, "\xc3\xa9t\xc3\xa9.txt");

  h = HeadersOf(R"(form-data; name="f"; filename="../../etc/passwd")");
  EXPECT_EQ(h.filename, "../../etc/passwd");  // names are data; the store never uses them as paths
}

TEST(MultipartTest, ExtendedFilenameIsPreferred) {
  MultipartPartHeaders h =
      HeadersOf("form-data; name=file; filename*=UTF-8''%e2%82%ac%20rates.txt; filename=fallback");
  EXPECT_EQ(h.filename, "\xe2\x82\xac rates.txt");
  h = HeadersOf("form-data; name=file; filename=\"fallback\"; filename*=utf-8'en'a%2Fb");
  EXPECT_EQ(h.filename, "a/b");
  h = HeadersOf("form-data; name=file; filename*=iso-8859-1''%E9t%E9");
  EXPECT_EQ(h.filename, "\xc3\xa9t\xc3\xa9");
  // Undecodable extended values are ignored (RFC 6266 section 4.3).
  h = HeadersOf("form-data; name=file; filename*=UTF-8''bad%zz; filename=fallback");
  EXPECT_EQ(h.filename, "fallback");
  h = HeadersOf("form-data; name=file; filename*=KOI8-R''x; filename=fallback");
  EXPECT_EQ(h.filename, "fallback");
  h = HeadersOf("form-data; name=file; filename*=UTF-8''trunc%4");
  EXPECT_FALSE(h.filename.has_value());
}

TEST(MultipartTest, HeaderFoldingIsUnfolded) {
  Recorder r("b");
  ASSERT_TRUE(
      r.FeedAll("--b\r\nContent-Disposition: form-data;\r\n name=a\r\n\r\nx\r\n--b--", 1).ok());
  ASSERT_EQ(r.parts.size(), 1u);
  EXPECT_EQ(r.parts[0].headers.name, "a");
}

TEST(MultipartTest, CallbackErrorsArePropagated) {
  int ends = 0;
  MultipartParser parser(
      "b", {.on_part_begin = {},
            .on_part_data = [](std::string_view) { return Status::Error("disk full"); },
            .on_part_end =
                [&] {
                  ++ends;
                  return Status();
                }});
  Status s = parser.Feed("--b\r\nContent-Disposition: form-data; name=a\r\n\r\ndata\r\n--b--");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "disk full");
  EXPECT_EQ(ends, 0);
  EXPECT_EQ(parser.Finish().message(), "disk full");

  MultipartParser refuse("b", {.on_part_begin =
                                   [](const MultipartPartHeaders&) {
                                     return Status::Error("File size exceeds maximum of 1 MB");
                                   },
                               .on_part_data = {},
                               .on_part_end = {}});
  s = refuse.Feed("--b\r\nContent-Disposition: form-data; name=a\r\n\r\n");
  EXPECT_EQ(s.ok() ? "" : s.message(), "File size exceeds maximum of 1 MB");
}

TEST(MultipartTest, BoundaryFromContentType) {
  auto boundary = [](std::string_view ct) {
    Result<std::string> r = MultipartParser::BoundaryFromContentType(ct);
    return r.ok() ? r.value() : "error: " + r.status().message();
  };
  EXPECT_EQ(boundary("multipart/form-data; boundary=abc"), "abc");
  EXPECT_EQ(boundary("Multipart/Form-Data;BOUNDARY=\"a b;c\""), "a b;c");
  EXPECT_EQ(boundary("multipart/form-data; charset=utf-8; boundary=----WebKitFormBoundary7MA4YWxk"),
            "----WebKitFormBoundary7MA4YWxk");
  EXPECT_EQ(boundary("multipart/form-data; boundary=" + std::string(70, 'x')),
            std::string(70, 'x'));
  EXPECT_EQ(boundary("multipart/form-data"),
            "error: Invalid multipart body: Content-Type has no boundary parameter");
  EXPECT_EQ(boundary("multipart/form-data; boundary="),
            "error: Invalid multipart body: boundary must be 1 to 70 characters long");
  EXPECT_EQ(boundary("multipart/form-data; boundary=\"\""),
            "error: Invalid multipart body: boundary must be 1 to 70 characters long");
  EXPECT_EQ(boundary("multipart/form-data; boundary=" + std::string(71, 'x')),
            "error: Invalid multipart body: boundary must be 1 to 70 characters long");
  EXPECT_EQ(boundary("multipart/form-data; boundary=\"a\rb\""),
            "error: Invalid multipart body: boundary contains an invalid character");
  EXPECT_EQ(boundary("application/json"),
            "error: Invalid multipart body: Content-Type is not multipart/form-data");
  EXPECT_EQ(boundary(""), "error: Invalid multipart body: Content-Type is not multipart/form-data");
  EXPECT_EQ(boundary("multipart/form-data; boundary=\"abc"),
            "error: Invalid multipart body: unterminated quoted string in Content-Type");
}

}  // namespace
}  // namespace ci::daemon
