// LoadLlmConfig: every default and every error, from a fake environment and a fake file reader.
#include "llm/llm_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

namespace ci::llm {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class LlmConfigTest : public ::testing::Test {
 protected:
  Result<LlmConfig> Load() {
    EnvLookup getenv = [this](const char* name) -> const char* {
      read_.insert(name);
      auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    };
    ReadFile read_file = [this](const std::string& path) -> Result<std::string> {
      files_read_.push_back(path);
      auto it = files_.find(path);
      if (it == files_.end()) return Status::Error(path + ": No such file or directory");
      return it->second;
    };
    return LoadLlmConfig(getenv, read_file);
  }

  std::string Error() {
    Result<LlmConfig> c = Load();
    EXPECT_FALSE(c.ok());
    return c.ok() ? "" : c.status().message();
  }

  std::map<std::string, std::string> env_;
  std::map<std::string, std::string> files_;
  std::set<std::string> read_;
  std::vector<std::string> files_read_;
};

TEST_F(LlmConfigTest, NothingConfiguredReadsNothingElse) {
  env_["LLM_MODEL"] = "ignored";
  Result<LlmConfig> c = Load();
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->configured());
  EXPECT_EQ(read_, std::set<std::string>{"LLM_PROVIDER"});

  env_["LLM_PROVIDER"] = "";
  c = Load();
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->configured());
  EXPECT_TRUE(c->model.empty());
}

TEST_F(LlmConfigTest, OpenAiWithEverything) {
  env_ = {{"LLM_PROVIDER", "OpenAI"},
          {"LLM_MODEL", "gpt-4o-mini"},
          {"LLM_BASE_URL", "https://api.openai.com/v1//"},
          {"LLM_API_KEY", "sk-test"},
          {"LLM_TIMEOUT_SEC", "120"}};
  Result<LlmConfig> c = Load();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->configured());
  EXPECT_EQ(c->provider, "openai");
  EXPECT_EQ(c->model, "gpt-4o-mini");
  EXPECT_EQ(c->base_url, "https://api.openai.com/v1");
  EXPECT_EQ(c->api_key, "sk-test");
  EXPECT_EQ(c->timeout, std::chrono::seconds(120));
}

TEST_F(LlmConfigTest, DefaultsForGeminiAndALocalServer) {
  env_ = {{"LLM_PROVIDER", "gemini"}, {"LLM_MODEL", "gemini-2.0-flash"}};
  Result<LlmConfig> c = Load();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->base_url, "https://generativelanguage.googleapis.com/v1beta");
  EXPECT_EQ(c->api_key, "");
  EXPECT_EQ(c->timeout, std::chrono::seconds(60));

  env_ = {{"LLM_PROVIDER", "openai"},
          {"LLM_MODEL", "llama3"},
          {"LLM_BASE_URL", "http://localhost:11434/v1"},
          {"LLM_API_KEY", ""}};
  c = Load();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->base_url, "http://localhost:11434/v1");
  EXPECT_EQ(c->api_key, "") << "an empty LLM_API_KEY is no key";
}

TEST_F(LlmConfigTest, ProviderAndModelErrors) {
  env_ = {{"LLM_PROVIDER", "foo"}, {"LLM_MODEL", "m"}};
  std::string e = Error();
  EXPECT_THAT(e, HasSubstr("LLM_PROVIDER"));
  EXPECT_THAT(e, HasSubstr("'foo'"));
  EXPECT_THAT(e, HasSubstr("openai|gemini"));

  env_ = {{"LLM_PROVIDER", "gemini"}};
  EXPECT_EQ(Error(), "LLM_MODEL must be set when LLM_PROVIDER is set");
  env_["LLM_MODEL"] = "";
  EXPECT_THAT(Error(), HasSubstr("LLM_MODEL"));
}

TEST_F(LlmConfigTest, BaseUrlErrors) {
  env_ = {{"LLM_PROVIDER", "openai"}, {"LLM_MODEL", "m"}};
  std::string e = Error();
  EXPECT_THAT(e, HasSubstr("LLM_BASE_URL must be set when LLM_PROVIDER is openai"));
  EXPECT_THAT(e, HasSubstr("https://api.openai.com/v1"));
  EXPECT_THAT(e, HasSubstr("http://localhost:11434/v1"));

  env_["LLM_BASE_URL"] = "api.openai.com/v1";
  EXPECT_EQ(Error(), "LLM_BASE_URL: 'api.openai.com/v1' must start with http:// or https://");
  env_["LLM_BASE_URL"] = "ftp://example.com";
  EXPECT_THAT(Error(), HasSubstr("must start with http:// or https://"));
  env_["LLM_BASE_URL"] = "https://";
  EXPECT_THAT(Error(), HasSubstr("no host"));
  env_["LLM_BASE_URL"] = "http://localhost:99999/v1";
  e = Error();
  EXPECT_THAT(e, HasSubstr("LLM_BASE_URL"));
  EXPECT_THAT(e, HasSubstr("port"));

  env_ = {{"LLM_PROVIDER", "gemini"}, {"LLM_MODEL", "m"}, {"LLM_BASE_URL", "localhost:8080"}};
  EXPECT_THAT(Error(), HasSubstr("must start with http:// or https://"));
}

TEST_F(LlmConfigTest, TimeoutBounds) {
  env_ = {{"LLM_PROVIDER", "gemini"}, {"LLM_MODEL", "m"}};
  for (const char* bad : {"0", "3601", "abc", "", "-5"}) {
    env_["LLM_TIMEOUT_SEC"] = bad;
    std::string e = Error();
    EXPECT_THAT(e, HasSubstr("LLM_TIMEOUT_SEC")) << bad;
    EXPECT_THAT(e, HasSubstr("1 to 3600")) << bad;
  }
  env_["LLM_TIMEOUT_SEC"] = "3600";
  Result<LlmConfig> c = Load();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->timeout, std::chrono::seconds(3600));
  env_["LLM_TIMEOUT_SEC"] = "1";
  c = Load();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->timeout, std::chrono::seconds(1));
}

TEST_F(LlmConfigTest, KeyFromAFileTrimmed) {
  env_ = {{"LLM_PROVIDER", "gemini"}, {"LLM_MODEL", "m"}, {"LLM_API_KEY_FILE", "/run/key"}};
  files_["/run/key"] = "AIza-secret \t\r\n\n";
  Result<LlmConfig> c = Load();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->api_key, "AIza-secret");
  EXPECT_EQ(files_read_, std::vector<std::string>{"/run/key"});
}

TEST_F(LlmConfigTest, KeyErrorsNeverShowTheKey) {
  env_ = {{"LLM_PROVIDER", "gemini"},
          {"LLM_MODEL", "m"},
          {"LLM_API_KEY", "inline-secret"},
          {"LLM_API_KEY_FILE", "/run/key"}};
  files_["/run/key"] = "file-secret";
  EXPECT_EQ(Error(), "LLM_API_KEY and LLM_API_KEY_FILE are both set: use one");

  env_.erase("LLM_API_KEY");
  env_["LLM_API_KEY_FILE"] = "/missing";
  std::string e = Error();
  EXPECT_THAT(e, HasSubstr("LLM_API_KEY_FILE"));
  EXPECT_THAT(e, HasSubstr("/missing: No such file or directory"));

  env_["LLM_API_KEY_FILE"] = "/run/empty";
  files_["/run/empty"] = " \n\n";
  e = Error();
  EXPECT_THAT(e, HasSubstr("LLM_API_KEY_FILE"));
  EXPECT_THAT(e, HasSubstr("/run/empty"));
  EXPECT_THAT(e, HasSubstr("empty"));

  // A line break inside the key would end the request header early.
  files_["/run/key"] = "first-secret\nsecond-line";
  env_["LLM_API_KEY_FILE"] = "/run/key";
  e = Error();
  EXPECT_THAT(e, HasSubstr("control character"));
  EXPECT_THAT(e, Not(HasSubstr("secret")));

  env_.erase("LLM_API_KEY_FILE");
  env_["LLM_API_KEY"] = "inline\r\nX-Injected: 1";
  e = Error();
  EXPECT_THAT(e, HasSubstr("LLM_API_KEY"));
  EXPECT_THAT(e, Not(HasSubstr("Injected")));
}

}  // namespace
}  // namespace ci::llm
