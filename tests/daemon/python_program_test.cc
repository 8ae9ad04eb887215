#include "daemon/service/python_program.h"

#include <gtest/gtest.h>

namespace ci::daemon {
namespace {

const std::vector<Language> kAll = {{"python", "/usr/bin/python3", "3.11"},
                                    {"bash", "/bin/bash", "5.2"}};

TEST(BuildProgram, PythonRunsTheDriverToldHowByItsGo) {
  auto p = BuildProgram("python", true, 5, kAll);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->entrypoint, "__main__.py");
  EXPECT_EQ(p->argv, (std::vector<std::string>{"python3", "-c", std::string(PythonDriver())}));
  EXPECT_EQ(p->go, "interactive 5\n");
  auto script = BuildProgram("python", false, 7, kAll);
  ASSERT_TRUE(script.ok());
  EXPECT_EQ(script->argv, p->argv);
  EXPECT_EQ(script->go, "script 7\n");
}

TEST(BuildProgram, APrestartedInterpreterIsTheDriverWithItsWarmImports) {
  EXPECT_EQ(PythonPrestartArgv({}),
            (std::vector<std::string>{"python3", "-c", std::string(PythonDriver())}));
  EXPECT_EQ(
      PythonPrestartArgv({"numpy", "pandas"}),
      (std::vector<std::string>{"python3", "-c", std::string(PythonDriver()), "numpy", "pandas"}));
}

TEST(BuildProgram, OtherLanguagesRunTheirEntrypoint) {
  auto p = BuildProgram("bash", true, 5, kAll);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->entrypoint, "__main__.sh");
  EXPECT_EQ(p->argv, (std::vector<std::string>{"/bin/bash", "/workspace/__main__.sh"}));
  EXPECT_EQ(p->go, "");
}

TEST(BuildProgram, UnknownOrMissingLanguageNamesWhatIsAvailable) {
  auto p = BuildProgram("cobol", true, 5, kAll);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "Unsupported language 'cobol'. Available: python, bash.");
  auto js = BuildProgram("javascript", true, 5, kAll);  // known, but not installed
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
