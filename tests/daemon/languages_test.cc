#include "daemon/service/languages.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "common/run_in.h"
#include "daemon/service/python_program.h"

namespace ci::daemon {
namespace {

const std::vector<Language> kAll = {{"python", "/usr/bin/python3", "3.11"},
                                    {"bash", "/bin/bash", "5.2"},
                                    {"go", "/usr/bin/go", "1.19.8", "version"}};

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

// The driver run in `dir` (where a program's files are) with stdin at its end: no run comes, so
// it exits after its imports; what it printed on stdout and stderr, then its exit status.
std::string RunDriverIn(const std::string& dir, const std::vector<std::string>& argv) {
  testing_support::Ran ran = testing_support::RunIn(dir, argv, true);
  return ran.out + "exit " + std::to_string(ran.status);
}

// Issue 30 item 1: a program's files are in the workspace, which `python3 -c` puts first on
// sys.path; none of them may stand in for a module the driver itself imports before the program
// runs (with warm imports or without).
TEST(PythonDriver, ImportsNothingFromTheProgramsDirectory) {
  char dir_template[] = "/tmp/driver-imports-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const char* modules[] = {"ast", "math", "resource", "stat", "gc", "json"};
  for (const char* m : modules) std::ofstream(dir + "/" + m + ".py") << "print('PWNED')\n";
  EXPECT_EQ(RunDriverIn(dir, PythonPrestartArgv({})), "exit 0");
  EXPECT_EQ(RunDriverIn(dir, PythonPrestartArgv({"json"})), "exit 0");
  for (const char* m : modules) std::remove((dir + "/" + m + ".py").c_str());
  ::rmdir(dir.c_str());
}

TEST(BuildProgram, OtherLanguagesRunTheirEntrypoint) {
  auto p = BuildProgram("bash", true, 5, kAll);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->entrypoint, "__main__.sh");
  EXPECT_EQ(p->argv, (std::vector<std::string>{"/bin/bash", "/workspace/__main__.sh"}));
  EXPECT_EQ(p->go, "");
}

// Go builds the workspace's package (the entrypoint and any .go file staged with it) in a module
// the daemon stages unless the request has a go.mod, then execs the binary.
TEST(BuildProgram, GoBuildsTheWorkspaceModuleThenExecsTheProgram) {
  auto p = BuildProgram("go", false, 5, kAll);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->entrypoint, "main.go");
  ASSERT_EQ(p->argv.size(), 3u);
  EXPECT_EQ(p->argv[0], "/bin/sh");
  const std::string& script = p->argv[2];
  // The usual program: the toolchain's compile and link against the precompiled library.
  EXPECT_NE(script.find("readlink -f /usr/bin/go"), std::string::npos) << script;
  EXPECT_NE(script.find("\"$t/compile\" -p main -complete -importcfg"), std::string::npos);
  EXPECT_NE(script.find("\"$t/link\" -importcfg \"$b/importcfg\" -s -w"), std::string::npos);
  // Anything else: go build of the module.
  EXPECT_NE(script.find("/usr/bin/go build -o \"$b/main\" -ldflags='-s -w' ."), std::string::npos)
      << script;
  EXPECT_NE(script.find("s=" + std::string(kGoStdDir) + "/pkg;"), std::string::npos);
  EXPECT_NE(script.find("GOFLAGS=-pkgdir=$s "), std::string::npos);
  EXPECT_NE(script.find("CGO_ENABLED=0 GOPROXY=off"), std::string::npos);
  EXPECT_EQ(script.find("@GO@"), std::string::npos);
  EXPECT_EQ(script.find("@STD@"), std::string::npos);
  EXPECT_TRUE(script.ends_with("exec \"$b/main\"\n")) << script;
  EXPECT_EQ(p->go, "");
  ASSERT_EQ(p->support_files.size(), 1u);
  EXPECT_EQ(p->support_files[0].path, "go.mod");
  EXPECT_EQ(p->support_files[0].content, "module sandbox\n\ngo 1.19\n");
}

TEST(KnownLanguages, EachSaysHowItPrintsItsVersion) {
  for (const Language& l : KnownLanguages()) {
    EXPECT_EQ(l.version_arg, l.name == "go" ? "version" : "--version") << l.name;
  }
}

TEST(BuildProgram, UnknownOrMissingLanguageNamesWhatIsAvailable) {
  auto p = BuildProgram("cobol", true, 5, kAll);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "Unsupported language 'cobol'. Available: python, bash, go.");
  auto js = BuildProgram("javascript", true, 5, kAll);  // known, but not installed
  ASSERT_FALSE(js.ok());
  EXPECT_EQ(js.status().message(),
            "Unsupported language 'javascript'. Available: python, bash, go.");
}

TEST(AvailableLanguages, FindsInterpretersUnderTheRoot) {
  auto host = AvailableLanguages("host");
  ASSERT_FALSE(host.empty());
  EXPECT_EQ(host[0].name, "python");
  EXPECT_TRUE(AvailableLanguages("/nonexistent-root").empty());
}

TEST(ParseVersion, FindsTheFirstDottedNumber) {
  EXPECT_EQ(ParseVersion("Python 3.11.2\n"), "3.11.2");
  EXPECT_EQ(ParseVersion("v20.20.2\n"), "20.20.2");
  EXPECT_EQ(ParseVersion("GNU bash, version 5.2.15(1)-release (x86_64-pc-linux-gnu)\n"), "5.2.15");
  EXPECT_EQ(ParseVersion("go version go1.19.8 linux/amd64"), "1.19.8");
  EXPECT_EQ(ParseVersion("no version here 7\n"), "");
}

}  // namespace
}  // namespace ci::daemon
