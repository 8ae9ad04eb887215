// The agent's wire (src/agent/agent_wire.h): what one side encodes the other decodes, and what no
// well-behaved side sends is refused rather than misread.
#include <dirent.h>
#include <gtest/gtest.h>

#include "agent/agent_wire.h"

namespace ci::agent {
namespace {

TEST(AgentWireTest, ExecRequestRoundTrips) {
  ExecRequest r{7, true, "/workspace", {"python3", "-c", "print(1)", ""}, {"A=1", "B="}};
  auto back = DecodeExec(EncodeExec(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->id, 7u);
  EXPECT_TRUE(back->attach_stdin);
  EXPECT_EQ(back->cwd, "/workspace");
  EXPECT_EQ(back->argv, r.argv);
  EXPECT_EQ(back->env, r.env);
}

TEST(AgentWireTest, MalformedExecRequestsAreRefused) {
  std::string good = EncodeExec({1, false, "/", {"true"}, {}});
  for (size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_FALSE(DecodeExec(good.substr(0, cut))) << "cut at " << cut;
  }
  EXPECT_FALSE(DecodeExec(good + "x")) << "trailing bytes";
  EXPECT_FALSE(DecodeExec(EncodeExec({1, false, "/", {}, {}}))) << "no argv";
  // A count far beyond the payload must not make the decoder allocate or read past it.
  std::string huge = good;
  huge[4 + 1 + 2] = '\xff';  // argv count's low byte, after id, the stdin flag and "/\0"
  huge[4 + 1 + 2 + 3] = '\x7f';
  EXPECT_FALSE(DecodeExec(huge));
}

TEST(AgentWireTest, WriteFilesRequestRoundTripsAnyBytesAndRefusesWhatIsCut) {
  const std::string binary("a\0b\xff", 4);
  WriteFilesRequest r{9, "/workspace", {{"main.py", "print(1)\n"}, {"data", binary}, {"e", ""}}};
  const std::string good = EncodeWriteFiles(r);
  auto back = DecodeWriteFiles(good);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->id, 9u);
  EXPECT_EQ(back->dir, "/workspace");
  EXPECT_EQ(back->files, r.files);
  for (size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_FALSE(DecodeWriteFiles(good.substr(0, cut))) << "cut at " << cut;
  }
  EXPECT_FALSE(DecodeWriteFiles(good + "x")) << "trailing bytes";
  std::string huge = good;
  huge[4 + 11 + 3] = '\x7f';  // the file count's high byte, after the id and "/workspace\0"
  EXPECT_FALSE(DecodeWriteFiles(huge));
}

TEST(AgentWireTest, DirListingRoundTripsItsEntriesOrWhyNot) {
  DirListing l{4, {{DT_REG, "main.py"}, {DT_DIR, "out dir"}}, ""};
  const std::string good = EncodeDirListed(l);
  auto back = DecodeDirListed(good);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->id, 4u);
  ASSERT_EQ(back->entries.size(), 2u);
  EXPECT_EQ(back->entries[1].type, DT_DIR);
  EXPECT_EQ(back->entries[1].name, "out dir");
  EXPECT_EQ(back->why, "");
  EXPECT_FALSE(DecodeDirListed(good.substr(0, good.size() - 1))) << "a name cut short";
  EXPECT_FALSE(DecodeDirListed(good.substr(0, 4))) << "no status";
  auto empty = DecodeDirListed(EncodeDirListed({5, {}, ""}));
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->entries.empty() && empty->why.empty());
  auto refused = DecodeDirListed(EncodeDirListed({6, {}, "/workspace: Permission denied"}));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->why, "/workspace: Permission denied");
}

TEST(AgentWireTest, OutputAndExitedRoundTrip) {
  auto out = DecodeOutput(EncodeOutput(3, 2, std::string("a\0b", 3)));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->id, 3u);
  EXPECT_EQ(out->stream, 2);
  EXPECT_EQ(out->bytes, std::string("a\0b", 3));
  EXPECT_FALSE(DecodeOutput(EncodeOutput(3, 3, "x"))) << "no such stream";
  EXPECT_FALSE(DecodeOutput("abc"));
  auto exited = DecodeExited(EncodeExited(9, -1));
  ASSERT_TRUE(exited);
  EXPECT_EQ(exited->first, 9u);
  EXPECT_EQ(exited->second, -1);
  EXPECT_FALSE(DecodeExited("1234567"));
}

TEST(AgentWireTest, FrameReaderCutsFramesFedInAnySplit) {
  std::string stream = Frame(Msg::kReady, WithId(1)) +
                       Frame(Msg::kOutput, EncodeOutput(1, 1, "hi")) +
                       Frame(Msg::kExited, EncodeExited(1, 0));
  for (size_t step = 1; step <= stream.size(); ++step) {
    FrameReader reader;
    std::vector<Msg> types;
    Msg type;
    std::string payload;
    bool bad = false;
    for (size_t at = 0; at < stream.size(); at += step) {
      reader.Feed(std::string_view(stream).substr(at, step));
      while (reader.Next(&type, &payload, &bad)) types.push_back(type);
      ASSERT_FALSE(bad);
    }
    EXPECT_EQ(types, (std::vector<Msg>{Msg::kReady, Msg::kOutput, Msg::kExited})) << step;
  }
}

TEST(AgentWireTest, AnOversizedFrameIsACorruptStream) {
  FrameReader reader;
  reader.Feed(std::string("\x0b\xff\xff\xff\x7f", 5));
  Msg type;
  std::string payload;
  bool bad = false;
  EXPECT_FALSE(reader.Next(&type, &payload, &bad));
  EXPECT_TRUE(bad);
}

}  // namespace
}  // namespace ci::agent
