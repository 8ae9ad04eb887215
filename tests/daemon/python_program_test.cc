#include "daemon/service/python_program.h"

#include <gtest/gtest.h>

namespace ci::daemon {
namespace {

const std::vector<Language> kAll = {{"python", "/usr/bin/python3", "3.11"},
                                    {"bash", "/bin/bash", "5.2"}};

TEST(BuildProgram, PythonInteractiveRunsTheDriver) {
  auto p = BuildProgram("python", true, kAll);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->entrypoint, "__main__.py");
  ASSERT_EQ(p->argv.size(), 3u);
  EXPECT_EQ(p->argv[0], "python3");
  EXPECT_EQ(p->argv[1], "-c");
  EXPECT_EQ(p->argv[2], PythonInteractiveDriver());
}

TEST(BuildProgram, PythonScriptRunsTheFile) {
  auto p = BuildProgram("python", false, kAll);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->argv, (std::vector<std::string>{"python3", "/workspace/__main__.py"}));
}

TEST(BuildProgram, OtherLanguagesRunTheirEntrypoint) {
  auto p = BuildProgram("bash", true, kAll);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->entrypoint, "__main__.sh");
  EXPECT_EQ(p->argv, (std::vector<std::string>{"/bin/bash", "/workspace/__main__.sh"}));
}

TEST(BuildProgram, UnknownOrMissingLanguageNamesWhatIsAvailable) {
  auto p = BuildProgram("cobol", true, kAll);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "Unsupported language 'cobol'. Available: python, bash.");
  auto js = BuildProgram("javascript", true, kAll);  // known, but not installed
  ASSERT_FALSE(js.ok());
  EXPECT_EQ(js.status().message(), "Unsupported language 'javascript'. Available: python, bash.");
}

TEST(AvailableLanguages, FindsInterpretersUnderTheRoot) {
  auto host = AvailableLanguages("host");
  ASSERT_FALSE(host.empty());
  EXPECT_EQ(host[0].name, "python");
  EXPECT_TRUE(AvailableLanguages("/nonexistent-root").empty());
}

}  // namespace
}  // namespace ci::daemon

namespace ci::daemon {
namespace {

TEST(ParseVersion, FindsTheFirstDottedNumber) {
  EXPECT_EQ(ParseVersion("Python 3.11.2\n"), "3.11.2");
  EXPECT_EQ(ParseVersion("v20.20.2\n"), "20.20.2");
  EXPECT_EQ(ParseVersion("GNU bash, version 5.2.15(1)-release (x86_64-pc-linux-gnu)\n"), "5.2.15");
  EXPECT_EQ(ParseVersion("go version go1.19.8 linux/amd64"), "1.19.8");
  EXPECT_EQ(ParseVersion("no version here 7\n"), "");
}

}  // namespace
}  // namespace ci::daemon
