// The E2B sandbox plane's pure parts: Connect's framing and errors (daemon/e2b/connect_rpc.h) and
// the process.Process requests (daemon/e2b/process_requests.h), every refusal naming its field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <csignal>
#include <string>
#include <utility>

#include "daemon/e2b/connect_rpc.h"
#include "daemon/e2b/process_requests.h"

namespace ci::daemon::e2b {
namespace {

using ::testing::HasSubstr;

// The envelope's 5-byte prefix: flags, then the length big-endian.
std::string Prefix(uint8_t flags, uint32_t length) {
  std::string out(1, static_cast<char>(flags));
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(length >> shift));
  return out;
}

uint32_t DeclaredLength(const std::string& framed) {
  uint32_t n = 0;
  for (int i = 1; i < 5; ++i) n = (n << 8) | static_cast<uint8_t>(framed[i]);
  return n;
}

rapidjson::Document ParseJsonText(const std::string& text) {
  rapidjson::Document doc;
  doc.Parse(text.data(), text.size());
  EXPECT_FALSE(doc.HasParseError()) << text;
  return doc;
}

// --- connect_rpc ---

TEST(E2bConnectStatus, MapsEveryCode) {
  const std::pair<const char*, int> cases[] = {
      {"canceled", 499},
      {"unknown", 500},
      {"invalid_argument", 400},
      {"deadline_exceeded", 504},
      {"not_found", 404},
      {"already_exists", 409},
      {"permission_denied", 403},
      {"resource_exhausted", 429},
      {"failed_precondition", 400},
      {"aborted", 409},
      {"out_of_range", 400},
      {"unimplemented", 501},
      {"internal", 500},
      {"unavailable", 503},
      {"data_loss", 500},
      {"unauthenticated", 401},
  };
  for (const auto& [code, status] : cases) EXPECT_EQ(ConnectHttpStatus(code), status) << code;
}

TEST(E2bConnectStatus, UnknownCodeIs500) {
  EXPECT_EQ(ConnectHttpStatus("no_such_code"), 500);
  EXPECT_EQ(ConnectHttpStatus(""), 500);
  EXPECT_EQ(ConnectHttpStatus("NOT_FOUND"), 500);
}

TEST(E2bConnectError, CarriesStatusCodeAndMessage) {
  HttpResponse r = ConnectError("not_found", "process \"x\" is not running");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.content_type, "application/json");
  auto doc = ParseJsonText(r.body);
  ASSERT_TRUE(doc.IsObject());
  EXPECT_STREQ(doc["code"].GetString(), "not_found");
  EXPECT_STREQ(doc["message"].GetString(), "process \"x\" is not running");
  EXPECT_EQ(ConnectError("unauthenticated", "who?").status, 401);
}

TEST(E2bEnvelope, FramesWithFlagsAndBigEndianLength) {
  const std::string json = R"({"event":{}})";
  const std::string framed = Envelope(json);
  ASSERT_EQ(framed.size(), 5 + json.size());
  EXPECT_EQ(framed.substr(0, 5), Prefix(0, json.size()));
  EXPECT_EQ(framed[0], '\0');
  EXPECT_EQ(framed.substr(5), json);

  // 0x010203 bytes: each length byte distinct, so the byte order shows.
  const std::string big(0x010203, 'x');
  const std::string framed_big = Envelope(big);
  ASSERT_EQ(framed_big.size(), 5 + big.size());
  EXPECT_EQ(static_cast<uint8_t>(framed_big[0]), 0x00);
  EXPECT_EQ(static_cast<uint8_t>(framed_big[1]), 0x00);
  EXPECT_EQ(static_cast<uint8_t>(framed_big[2]), 0x01);
  EXPECT_EQ(static_cast<uint8_t>(framed_big[3]), 0x02);
  EXPECT_EQ(static_cast<uint8_t>(framed_big[4]), 0x03);
}

TEST(E2bEnvelope, RoundTripsThroughUnwrap) {
  for (const std::string& json : {std::string(R"({"process":{"pid":7}})"), std::string(),
                                  std::string(300, 'a'), std::string(0x010203, 'b')}) {
    std::string why;
    auto back = UnwrapEnvelope(Envelope(json), &why);
    ASSERT_TRUE(back.has_value()) << why;
    EXPECT_EQ(*back, json);
    EXPECT_EQ(why, "");
  }
}

TEST(E2bEndOfStream, SuccessIsAnEmptyObject) {
  const std::string framed = EndOfStream();
  ASSERT_GE(framed.size(), 5u);
  EXPECT_EQ(static_cast<uint8_t>(framed[0]), 0x02);
  EXPECT_EQ(DeclaredLength(framed), framed.size() - 5);
  EXPECT_EQ(framed.substr(5), "{}");
}

TEST(E2bEndOfStream, ErrorCarriesCodeAndMessage) {
  const std::string framed = EndOfStream("not_found", "no process with tag \"t\"\n");
  ASSERT_GE(framed.size(), 5u);
  EXPECT_EQ(static_cast<uint8_t>(framed[0]), 0x02);
  EXPECT_EQ(DeclaredLength(framed), framed.size() - 5);
  auto doc = ParseJsonText(framed.substr(5));
  ASSERT_TRUE(doc.IsObject());
  ASSERT_TRUE(doc.HasMember("error"));
  const auto& error = doc["error"];
  ASSERT_TRUE(error.IsObject());
  EXPECT_STREQ(error["code"].GetString(), "not_found");
  EXPECT_STREQ(error["message"].GetString(), "no process with tag \"t\"\n");
  EXPECT_EQ(doc.MemberCount(), 1u);
}

TEST(E2bConnectStreamError, Is200WithTheEndOfStreamAlone) {
  HttpResponse r = ConnectStreamError("invalid_argument", "process.cmd is missing");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/connect+json");
  EXPECT_EQ(r.body, EndOfStream("invalid_argument", "process.cmd is missing"));
}

TEST(E2bUnwrapEnvelope, RefusesByProblem) {
  const std::string two = Envelope("{}") + Envelope("{}");
  const std::pair<std::string, const char*> cases[] = {
      {"", "5-byte prefix"},
      {std::string("\0\0\0", 3), "5-byte prefix"},
      {std::string("\0\0\0\0", 4), "5-byte prefix"},
      {Prefix(1, 2) + "{}", "compressed"},
      {Prefix(3, 2) + "{}", "compressed"},
      {Prefix(2, 2) + "{}", "flags 2"},
      {Prefix(0x80, 2) + "{}", "flags 128"},
      {Prefix(0, 2) + "{} ", "says 2 bytes, and 3 follow"},
      {Prefix(0, 10) + "{} ", "says 10 bytes, and 3 follow"},
      {Prefix(0, 0xffffffff) + "{}", "says 4294967295 bytes, and 2 follow"},
      {two, "says 2 bytes, and 9 follow"},
  };
  for (const auto& [body, says] : cases) {
    std::string why;
    auto r = UnwrapEnvelope(body, &why);
    EXPECT_FALSE(r.has_value()) << says;
    EXPECT_THAT(why, HasSubstr(says));
  }
}

TEST(E2bDecodeProtoBytes, TakesStandardUrlSafeAndUnpadded) {
  EXPECT_EQ(DecodeProtoBytes("aGVsbG8="), "hello");
  EXPECT_EQ(DecodeProtoBytes("aGVsbG8"), "hello");
  EXPECT_EQ(DecodeProtoBytes("aGk="), "hi");
  EXPECT_EQ(DecodeProtoBytes("aGk"), "hi");
  EXPECT_EQ(DecodeProtoBytes("+/+/"), "\xfb\xff\xbf");
  EXPECT_EQ(DecodeProtoBytes("-_-_"), "\xfb\xff\xbf");
  EXPECT_EQ(DecodeProtoBytes("+/8="), "\xfb\xff");
  EXPECT_EQ(DecodeProtoBytes("-_8="), "\xfb\xff");
  EXPECT_EQ(DecodeProtoBytes("-_8"), "\xfb\xff");
  EXPECT_EQ(DecodeProtoBytes(""), "");
}

TEST(E2bDecodeProtoBytes, RefusesGarbage) {
  for (const char* text : {"%%%%", "%%%", "a", "aGk=aGk=", "aG=k", "a*b="}) {
    EXPECT_FALSE(DecodeProtoBytes(text).has_value()) << text;
  }
}

// --- process_requests ---

TEST(E2bStartRequest, TakesTheFullRequest) {
  auto r = ParseStartRequest(
      R"({"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi"],)"
      R"("envs":{"A":"1","B_2":"x=y"},"cwd":"/home/user"},"tag":"job-1","stdin":true})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->config.cmd, "/bin/bash");
  EXPECT_THAT(r->config.args, ::testing::ElementsAre("-l", "-c", "echo hi"));
  EXPECT_EQ(r->config.envs.size(), 2u);
  EXPECT_EQ(r->config.envs.at("A"), "1");
  EXPECT_EQ(r->config.envs.at("B_2"), "x=y");
  EXPECT_EQ(r->config.cwd, "/home/user");
  EXPECT_EQ(r->tag, "job-1");
  EXPECT_TRUE(r->stdin);
  EXPECT_FALSE(r->pty);
}

TEST(E2bStartRequest, DefaultsWhenOnlyCmd) {
  auto r = ParseStartRequest(R"({"process":{"cmd":"ls"}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->config.cmd, "ls");
  EXPECT_TRUE(r->config.args.empty());
  EXPECT_TRUE(r->config.envs.empty());
  EXPECT_FALSE(r->config.cwd.has_value());
  EXPECT_FALSE(r->tag.has_value());
  EXPECT_FALSE(r->stdin);
  EXPECT_FALSE(r->pty);

  r = ParseStartRequest(R"({"process":{"cmd":"ls"},"stdin":false})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->stdin);
}

TEST(E2bStartRequest, PtyPresentSetsPty) {
  auto r = ParseStartRequest(R"({"process":{"cmd":"bash"},"pty":{"size":{"cols":80,"rows":24}}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->pty);
  r = ParseStartRequest(R"({"process":{"cmd":"bash"},"pty":null})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->pty);
}

TEST(E2bStartRequest, IgnoresUnknownFields) {
  auto r = ParseStartRequest(
      R"({"process":{"cmd":"ls","shell":true,"extra":[1]},"unknownField":{"x":1},"more":"y"})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->config.cmd, "ls");
  EXPECT_FALSE(r->pty);
}

TEST(E2bStartRequest, RefusesByName) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "process (its config) is missing"},
      {"{}", "process (its config) is missing"},
      {R"({"process":null})", "process (its config) is missing"},
      {R"({"process":"ls"})", "process (its config) is missing"},
      {"[]", "object"},
      {"{", "not JSON"},
      {R"({"process":{}})", "process.cmd is missing"},
      {R"({"process":{"cmd":""}})", "process.cmd is missing"},
      {R"({"process":{"cmd":5}})", "process.cmd must be a string"},
      {R"({"process":{"cmd":["ls"]}})", "process.cmd must be a string"},
      {R"({"process":{"cmd":"ls","args":"-l"}})", "process.args must be a list of strings"},
      {R"({"process":{"cmd":"ls","args":["-l",1]}})", "process.args must be a list of strings"},
      {R"({"process":{"cmd":"ls","envs":["A=1"]}})", "process.envs must be an object of strings"},
      {R"({"process":{"cmd":"ls","envs":{"A":1}}})", "process.envs must be an object of strings"},
      {R"({"process":{"cmd":"ls","envs":{"A=B":"1"}}})", "process.envs has a key"},
      {R"({"process":{"cmd":"ls","envs":{"":"1"}}})", "process.envs has a key"},
      {R"({"process":{"cmd":"ls","envs":{"A\u0000B":"1"}}})", "process.envs has a key"},
      {R"({"process":{"cmd":"ls","cwd":5}})", "process.cwd must be a string"},
      {R"({"process":{"cmd":"ls"},"tag":7})", "tag must be a string"},
      {R"({"process":{"cmd":"ls"},"stdin":"yes"})", "stdin must be true or false"},
      {R"({"process":{"cmd":"ls"},"stdin":1})", "stdin must be true or false"},
  };
  for (const auto& [body, says] : cases) {
    auto r = ParseStartRequest(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_THAT(r.status().message(), HasSubstr(says)) << body;
  }
  auto r = ParseStartRequest(R"({"process":{"cmd":"ls","envs":{"A=B":"1"}}})");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("'A=B'"));
}

TEST(E2bListRequest, AnyObject) {
  EXPECT_TRUE(CheckListRequest("").ok());
  EXPECT_TRUE(CheckListRequest("{}").ok());
  EXPECT_TRUE(CheckListRequest(R"({"whatever":[1,2]})").ok());
  Status s = CheckListRequest("[]");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("object"));
  s = CheckListRequest("{");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("not JSON"));
}

TEST(E2bSelectorRequest, ByPidOrTag) {
  auto r = ParseSelectorRequest(R"({"process":{"pid":42}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->pid, 42u);
  EXPECT_EQ(r->tag, "");

  r = ParseSelectorRequest(R"({"process":{"pid":"42"}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->pid, 42u);

  r = ParseSelectorRequest(R"({"process":{"pid":4294967295}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->pid, 4294967295u);

  r = ParseSelectorRequest(R"({"process":{"pid":"4294967295"}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->pid, 4294967295u);

  r = ParseSelectorRequest(R"({"process":{"tag":"job-1"}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->pid.has_value());
  EXPECT_EQ(r->tag, "job-1");

  // A null pid is an absent one.
  r = ParseSelectorRequest(R"({"process":{"pid":null,"tag":"job-2"}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->pid.has_value());
  EXPECT_EQ(r->tag, "job-2");
}

TEST(E2bSelectorRequest, RefusesByName) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "process (the selector"},
      {"{}", "process (the selector"},
      {R"({"process":5})", "process (the selector"},
      {"[]", "object"},
      {R"({"process":{}})", "neither a pid nor a tag"},
      {R"({"process":{"tag":""}})", "neither a pid nor a tag"},
      {R"({"process":{"tag":3}})", "process.tag must be a string"},
      {R"({"process":{"pid":-1}})", "process.pid"},
      {R"({"process":{"pid":"-1"}})", "process.pid"},
      {R"({"process":{"pid":4294967296}})", "process.pid"},
      {R"({"process":{"pid":"4294967296"}})", "process.pid"},
      {R"({"process":{"pid":"99999999999999999999999"}})", "process.pid"},
      {R"({"process":{"pid":"abc"}})", "process.pid"},
      {R"({"process":{"pid":"12abc"}})", "process.pid"},
      {R"({"process":{"pid":""}})", "process.pid"},
      {R"({"process":{"pid":1.5}})", "process.pid"},
      {R"({"process":{"pid":true}})", "process.pid"},
      // strtoul would wrap these to pids 1 and 4294967295, and take a sign or a space
      {R"({"process":{"pid":"-18446744073709551615"}})", "process.pid"},
      {R"({"process":{"pid":"-18446744069414584321"}})", "process.pid"},
      {R"({"process":{"pid":"+7"}})", "process.pid"},
      {R"({"process":{"pid":" 7"}})", "process.pid"},
      {R"({"process":{"pid":"-0"}})", "process.pid"},
  };
  for (const auto& [body, says] : cases) {
    auto r = ParseSelectorRequest(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_THAT(r.status().message(), HasSubstr(says)) << body;
  }
}

TEST(E2bInputRequest, DecodesStdin) {
  auto r = ParseInputRequest(R"({"process":{"pid":7},"input":{"stdin":"aGVsbG8="}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->which.pid, 7u);
  EXPECT_EQ(r->bytes, "hello");
  EXPECT_FALSE(r->pty);

  r = ParseInputRequest(R"({"process":{"tag":"t"},"input":{"stdin":"-_8"}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->which.tag, "t");
  EXPECT_EQ(r->bytes, "\xfb\xff");
  EXPECT_FALSE(r->pty);

  r = ParseInputRequest(R"({"process":{"pid":7},"input":{"stdin":"+/8="}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->bytes, "\xfb\xff");
}

TEST(E2bInputRequest, PtyInputSetsPty) {
  auto r = ParseInputRequest(R"({"process":{"pid":7},"input":{"pty":"aGk="}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->bytes, "hi");
  EXPECT_TRUE(r->pty);
}

TEST(E2bInputRequest, RefusesByName) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"input":{"stdin":"aGk="}})", "process (the selector"},
      {R"({"process":{"pid":7}})", "input is missing"},
      {R"({"process":{"pid":7},"input":"aGk="})", "input is missing"},
      {R"({"process":{"pid":7},"input":{}})", "input.stdin must be the bytes"},
      {R"({"process":{"pid":7},"input":{"stdin":5}})", "input.stdin must be the bytes"},
      {R"({"process":{"pid":7},"input":{"stdin":"%%%"}})", "input.stdin is not base64"},
      {R"({"process":{"pid":7},"input":{"stdin":"a"}})", "input.stdin is not base64"},
      {R"({"process":{"pid":7},"input":{"pty":"!!!!"}})", "input.pty is not base64"},
  };
  for (const auto& [body, says] : cases) {
    auto r = ParseInputRequest(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_THAT(r.status().message(), HasSubstr(says)) << body;
  }
}

TEST(E2bSignalRequest, TermAndKillByNameOrNumber) {
  const std::pair<const char*, int> cases[] = {
      {R"({"process":{"pid":7},"signal":"SIGNAL_SIGTERM"})", SIGTERM},
      {R"({"process":{"pid":7},"signal":"SIGNAL_SIGKILL"})", SIGKILL},
      {R"({"process":{"pid":7},"signal":15})", 15},
      {R"({"process":{"pid":7},"signal":9})", 9},
  };
  for (const auto& [body, signal] : cases) {
    auto r = ParseSignalRequest(body);
    ASSERT_TRUE(r.ok()) << body << ": " << r.status().message();
    EXPECT_EQ(r->signal, signal) << body;
    EXPECT_EQ(r->which.pid, 7u) << body;
  }
  EXPECT_EQ(SIGTERM, 15);
  EXPECT_EQ(SIGKILL, 9);
  auto r = ParseSignalRequest(R"({"process":{"tag":"t"},"signal":"SIGNAL_SIGKILL"})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->which.tag, "t");
  EXPECT_EQ(r->signal, 9);
}

TEST(E2bSignalRequest, RefusesOthers) {
  for (const char* body : {
           R"({"process":{"pid":7},"signal":"SIGNAL_UNSPECIFIED"})",
           R"({"process":{"pid":7},"signal":2})",
           R"({"process":{"pid":7},"signal":0})",
           R"({"process":{"pid":7},"signal":"SIGTERM"})",
           R"({"process":{"pid":7},"signal":"15"})",
           R"({"process":{"pid":7},"signal":true})",
           R"({"process":{"pid":7},"signal":null})",
           R"({"process":{"pid":7}})",
       }) {
    auto r = ParseSignalRequest(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_THAT(r.status().message(), HasSubstr("signal must be")) << body;
  }
  auto r = ParseSignalRequest(R"({"signal":"SIGNAL_SIGTERM"})");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("process (the selector"));
}

TEST(E2bBasicAuthUser, NamesTheUser) {
  auto r = BasicAuthUser(std::nullopt);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->has_value());

  r = BasicAuthUser("Basic dXNlcjo=");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value(), "user");

  r = BasicAuthUser("Basic cm9vdDo=");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value(), "root");

  r = BasicAuthUser("basic dXNlcjo=");  // the scheme is case-insensitive (RFC 9110)
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value(), "user");

  r = BasicAuthUser("Basic dXNlcjpwYXNz");  // user:pass
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value(), "user");
}

TEST(E2bBasicAuthUser, RefusesOtherSchemesAndGarbage) {
  auto r = BasicAuthUser("Bearer x");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("Authorization must be Basic"));

  r = BasicAuthUser("Basic %%%");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("not base64"));
}

}  // namespace
}  // namespace ci::daemon::e2b
