// The providers end to end over real sockets: what reaches the server (path, key header, body),
// what comes back (a reply with its wall time, or a ModelError of the right kind), and the API
// key redacted from everything a server echoes.
#include "llm/provider.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <variant>

#include "canned_server.h"
#include "common/await.h"
#include "llm/model_call.h"
#include "same_json.h"
#include "test_pki.h"

namespace ci::llm {
namespace {

using test_support::CannedServer;
using test_support::ChunkedResponse;
using test_support::HttpResponse;
using test_support::Pki;
using test_support::SameJson;
using test_support::ScopedEnv;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_support::AwaitOn;

constexpr char kKey[] = "sk-test-0123456789SECRET";

constexpr char kOpenAiAnswer[] = R"({"choices": [{"message": {"role": "assistant",
  "content": "It is 4."}}], "usage": {"prompt_tokens": 9, "completion_tokens": 3}})";

constexpr char kGeminiAnswer[] = R"({"candidates": [{"content": {"role": "model", "parts": [
  {"functionCall": {"name": "execute_code", "args": {"code": "print(2+2)\n"}}}]},
  "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 11, "candidatesTokenCount": 4}})";

class ProviderTest : public ::testing::Test {
 protected:
  LlmConfig Config(const std::string& provider, const std::string& base_url) {
    LlmConfig c;
    c.provider = provider;
    c.base_url = base_url;
    c.model = provider == "gemini" ? "gemini-test" : "gpt-test";
    c.api_key = kKey;
    c.timeout = std::chrono::seconds(20);
    return c;
  }

  ModelResult Complete(const LlmConfig& config) {
    std::unique_ptr<Provider> p = MakeProvider(io_.get_executor(), config);
    EXPECT_NE(p, nullptr);
    EXPECT_EQ(p->name(), config.provider);
    EXPECT_EQ(p->model(), config.model);
    return AwaitOn(io_, p->Complete(conversation_, tools_));
  }

  static Reply ExpectReply(const ModelResult& r) {
    if (const auto* e = std::get_if<ModelError>(&r)) {
      ADD_FAILURE() << "an error: " << e->message;
      return {};
    }
    return std::get<Reply>(r);
  }

  static ModelError ExpectError(const ModelResult& r, ModelError::Kind kind) {
    if (!std::holds_alternative<ModelError>(r)) {
      ADD_FAILURE() << "a reply, not an error";
      return {};
    }
    const ModelError& e = std::get<ModelError>(r);
    EXPECT_EQ(e.kind, kind) << e.message;
    return e;
  }

  static std::string Local(uint16_t port, const std::string& path,
                           const std::string& scheme = "http") {
    return scheme + "://127.0.0.1:" + std::to_string(port) + path;
  }

  boost::asio::io_context io_;
  std::vector<Message> conversation_ = {{Message::Role::kSystem, "Be brief.", {}, {}, {}},
                                        {Message::Role::kUser, "2+2?", {}, {}, {}}};
  std::vector<ToolDeclaration> tools_;
};

TEST_F(ProviderTest, OpenAiSendsTheConversationWithTheKeyAndReadsTheAnswer) {
  CannedServer server(io_, HttpResponse(200, kOpenAiAnswer), nullptr,
                      std::chrono::milliseconds(50));
  Reply r = ExpectReply(Complete(Config("openai", Local(server.port(), "/v1"))));
  EXPECT_EQ(r.message.role, Message::Role::kAssistant);
  EXPECT_EQ(r.message.text, "It is 4.");
  EXPECT_EQ(r.usage.prompt_tokens, 9);
  EXPECT_EQ(r.usage.completion_tokens, 3);
  EXPECT_GE(r.wall, std::chrono::milliseconds(50)) << "the server waited 50 ms before answering";

  ASSERT_EQ(server.requests().size(), 1u);
  const auto& req = server.requests()[0];
  EXPECT_EQ(req.request_line, "POST /v1/chat/completions HTTP/1.1");
  EXPECT_EQ(req.Header("authorization"), std::string("Bearer ") + kKey);
  EXPECT_EQ(req.Header("x-goog-api-key"), std::nullopt);
  EXPECT_TRUE(SameJson(req.body, R"({"model": "gpt-test", "messages": [
    {"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]})"));
}

TEST_F(ProviderTest, OpenAiWithoutAKeySendsNoAuthorization) {
  CannedServer server(io_, HttpResponse(200, kOpenAiAnswer));
  LlmConfig c = Config("openai", Local(server.port(), "/v1"));
  c.api_key.clear();
  EXPECT_EQ(ExpectReply(Complete(c)).message.text, "It is 4.");
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].Header("authorization"), std::nullopt);
}

TEST_F(ProviderTest, GeminiSendsTheKeyHeaderToTheModelsPath) {
  CannedServer server(
      io_, ChunkedResponse(200, {std::string(kGeminiAnswer, 40), std::string(kGeminiAnswer + 40)}));
  tools_ = {{"execute_code", "Runs a program.",
             R"({"type":"object","properties":{"code":{"type":"string"}}})"}};
  Reply r = ExpectReply(Complete(Config("gemini", Local(server.port(), "/v1beta"))));
  ASSERT_EQ(r.message.tool_calls.size(), 1u);
  EXPECT_EQ(r.message.tool_calls[0].name, "execute_code");
  EXPECT_EQ(r.message.tool_calls[0].id, "call_1");
  EXPECT_TRUE(SameJson(r.message.tool_calls[0].arguments_json, R"({"code": "print(2+2)\n"})"));
  EXPECT_EQ(r.usage.prompt_tokens, 11);
  EXPECT_EQ(r.usage.completion_tokens, 4);

  ASSERT_EQ(server.requests().size(), 1u);
  const auto& req = server.requests()[0];
  EXPECT_EQ(req.request_line, "POST /v1beta/models/gemini-test:generateContent HTTP/1.1");
  EXPECT_EQ(req.Header("x-goog-api-key"), kKey);
  EXPECT_EQ(req.Header("authorization"), std::nullopt);
  EXPECT_TRUE(SameJson(req.body, R"({
    "systemInstruction": {"parts": [{"text": "Be brief."}]},
    "contents": [{"role": "user", "parts": [{"text": "2+2?"}]}],
    "tools": [{"functionDeclarations": [{"name": "execute_code", "description": "Runs a program.",
      "parameters": {"type": "OBJECT", "properties": {"code": {"type": "STRING"}}}}]}]})"));
}

TEST_F(ProviderTest, GeminiOverTls) {
  ScopedEnv trust("SSL_CERT_FILE", Pki().trusted_ca_file);
  CannedServer server(io_, HttpResponse(200, kGeminiAnswer),
                      CannedServer::Tls(Pki().localhost.cert_pem, Pki().localhost.key_pem));
  Reply r = ExpectReply(
      Complete(Config("gemini", "https://localhost:" + std::to_string(server.port()) + "/v1beta")));
  EXPECT_EQ(r.message.tool_calls.size(), 1u);
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(ProviderTest, AnErrorStatusCarriesTheServersMessageWithTheKeyRedacted) {
  const std::string echo = std::string(R"({"error": {"message": "Incorrect API key provided: )") +
                           kKey + R"(.", "type": "invalid_request_error"}})";
  CannedServer server(io_, HttpResponse(500, echo));
  ModelError e = ExpectError(Complete(Config("openai", Local(server.port(), "/v1"))),
                             ModelError::Kind::kUnavailable);
  EXPECT_EQ(e.http_status, 500);
  EXPECT_EQ(e.message,
            "openai model server answered HTTP 500: Incorrect API key provided: [redacted].");

  CannedServer gemini(
      io_, HttpResponse(400, std::string(R"({"error": {"code": 400, "message": "key )") + kKey +
                                 R"( is invalid", "status": "INVALID_ARGUMENT"}})"));
  e = ExpectError(Complete(Config("gemini", Local(gemini.port(), ""))),
                  ModelError::Kind::kUnavailable);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.message, "gemini model server answered HTTP 400: key [redacted] is invalid");
}

TEST_F(ProviderTest, AnErrorBodyThatIsNoErrorJsonIsCutAndRedacted) {
  // The key straddles byte 300: cutting before redacting would leave a piece of it.
  const std::string body = std::string(290, 'x') + kKey + std::string(500, 'y');
  CannedServer server(io_, HttpResponse(502, body));
  ModelError e = ExpectError(Complete(Config("openai", Local(server.port(), "/v1"))),
                             ModelError::Kind::kUnavailable);
  EXPECT_EQ(e.http_status, 502);
  EXPECT_EQ(e.message,
            "openai model server answered HTTP 502: " + std::string(290, 'x') + "[redacted]");
  EXPECT_THAT(e.message, Not(HasSubstr("sk-test")));
}

TEST_F(ProviderTest, ASuccessThatIsNoAnswerIsMalformed) {
  CannedServer server(io_, HttpResponse(200, std::string(R"({"echo": ")") + kKey + R"("})"));
  ModelError e = ExpectError(Complete(Config("openai", Local(server.port(), "/v1"))),
                             ModelError::Kind::kMalformed);
  EXPECT_EQ(e.http_status, 0);
  EXPECT_THAT(e.message, HasSubstr("no choices"));
}

TEST_F(ProviderTest, NoAnswerInTimeIsTimedOut) {
  CannedServer server(io_, "");
  LlmConfig c = Config("openai", Local(server.port(), "/v1"));
  c.timeout = std::chrono::seconds(1);
  ModelError e = ExpectError(Complete(c), ModelError::Kind::kTimedOut);
  EXPECT_EQ(e.message, "openai model server: no answer from 127.0.0.1:" +
                           std::to_string(server.port()) + " within 1 s");
  EXPECT_EQ(e.http_status, 0);
}

TEST_F(ProviderTest, NothingListeningIsUnavailable) {
  const uint16_t port = test_support::ClosedPort(io_);
  ModelError e = ExpectError(Complete(Config("gemini", Local(port, "/v1beta"))),
                             ModelError::Kind::kUnavailable);
  EXPECT_EQ(e.http_status, 0);
  EXPECT_THAT(e.message,
              HasSubstr("gemini model server: connecting to 127.0.0.1:" + std::to_string(port)));
  EXPECT_THAT(e.message, HasSubstr("refused"));
}

TEST_F(ProviderTest, AnUntrustedServerIsUnavailable) {
  ScopedEnv trust("SSL_CERT_FILE", Pki().trusted_ca_file);
  CannedServer server(
      io_, HttpResponse(200, kOpenAiAnswer),
      CannedServer::Tls(Pki().from_untrusted.cert_pem, Pki().from_untrusted.key_pem));
  ModelError e = ExpectError(Complete(Config("openai", Local(server.port(), "/v1", "https"))),
                             ModelError::Kind::kUnavailable);
  EXPECT_THAT(e.message, HasSubstr("certificate verify failed"));
  EXPECT_TRUE(server.requests().empty());
}

TEST_F(ProviderTest, GeminiTakesTheModelWithItsModelsPrefix) {
  CannedServer server(io_, HttpResponse(200, kGeminiAnswer));
  LlmConfig c = Config("gemini", Local(server.port(), "/v1beta"));
  c.model = "models/gemini-test";
  ExpectReply(Complete(c));
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].request_line,
            "POST /v1beta/models/gemini-test:generateContent HTTP/1.1");
}

TEST(HttpErrorMessage, CutsNeitherTooLongNorInsideACharacter) {
  // "é" is two bytes, at 299 and 300: a cut at 300 would split it.
  EXPECT_EQ(HttpErrorMessage(500, std::string(299, 'x') + "\xc3\xa9tail", ""),
            "HTTP 500: " + std::string(299, 'x'));
  const std::string long_message = std::string(5000, 'm');
  EXPECT_EQ(HttpErrorMessage(429, R"({"error": {"message": ")" + long_message + R"("}})", ""),
            "HTTP 429: " + std::string(1000, 'm'));
  EXPECT_EQ(HttpErrorMessage(404, R"({"error": "model 'x' not found"})", ""),
            "HTTP 404: model 'x' not found");
  EXPECT_EQ(HttpErrorMessage(401, R"({"error": {"message": "bad key k3y"}})", "k3y"),
            "HTTP 401: bad key [redacted]");
}

TEST(Redact, ReplacesEveryOccurrence) {
  EXPECT_EQ(Redact("k and k and kk", "k"), "[redacted] and [redacted] and [redacted][redacted]");
  EXPECT_EQ(Redact("nothing here", "secret"), "nothing here");
  EXPECT_EQ(Redact("no key", ""), "no key");
  // A key that the replacement itself contains must not loop.
  EXPECT_EQ(Redact("a red b", "red"), "a [redacted] b");
}

}  // namespace
}  // namespace ci::llm
