// The startup probe of the languages (ExecutionService::ProbeLanguages, `<interpreter> --version`,
// `go version`, in a sandbox each) against the fake backend, seen through GET /v1/languages: an
// interpreter the backend's root lacks is dropped, one that answers gets its version, and one that
// does not answer in time (an emulated VM, a loaded host) is kept with its version unknown.
#include <thread>

#include "fake_daemon.h"

namespace ci::daemon {
namespace {

using namespace std::chrono_literals;
using asio::awaitable;

class LanguagesProbeTest : public DaemonApiTest {
 protected:
  void SetUp() override { Start(); }

  // name -> version of GET /v1/languages.
  std::map<std::string, std::string> Languages() {
    HttpReply r = client().Get("/v1/languages");
    EXPECT_EQ(r.status, 200) << r.body;
    std::map<std::string, std::string> out;
    rapidjson::Document j = Json(r);
    if (!j.HasMember("languages") || !j["languages"].IsArray()) return out;
    for (const auto& l : j["languages"].GetArray()) out[Str(l, "name")] = Str(l, "version");
    return out;
  }
};

TEST_F(LanguagesProbeTest, AMissingInterpreterIsDroppedASlowOneKept) {
  fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> {
    const std::string& interpreter = p.payload().argv.at(0);
    if (interpreter.find("python") != std::string::npos) {
      co_await p.Sleep(1h);  // until the probe's timeout stops it
      co_return p.Exit(0);
    }
    if (interpreter.find("bash") != std::string::npos) {
      p.Stdout("GNU bash, version 5.2.15(1)-release (x86_64-pc-linux-gnu)\n");
      co_return p.Exit(0);
    }
    co_return p.Exit(127);  // not in the root
  });
  const auto before = Languages();
  ASSERT_TRUE(before.count("python") && before.count("bash")) << "the host has both";
  Status probed = daemon().Await(daemon().wired().service().ProbeLanguages(200ms));
  ASSERT_TRUE(probed.ok()) << probed.message();
  const auto after = Languages();
  EXPECT_EQ(after.count("python"), 1u) << "a slow interpreter is not a missing one";
  EXPECT_EQ(after.at("python"), "");
  EXPECT_EQ(after.at("bash"), "5.2.15");
  for (const auto& [name, version] : after) {
    EXPECT_TRUE(name == "python" || name == "bash") << name << " exited 127 and stays listed";
  }
}

// A client asking while the probe runs gets the probe's answer, not a language it then drops.
TEST_F(LanguagesProbeTest, AListAskedDuringTheProbeIsTheProbedOne) {
  fake().RunPrograms([](FakeProcess& p) -> awaitable<RunOutcome> {
    const std::string& interpreter = p.payload().argv.at(0);
    if (interpreter.find("python") == std::string::npos) co_return p.Exit(127);
    co_await p.Sleep(300ms);
    p.Stdout("Python 3.11.2\n");
    co_return p.Exit(0);
  });
  std::map<std::string, std::string> during;
  std::thread asker([&] {
    std::this_thread::sleep_for(100ms);  // the probe is in python's sandbox by now
    during = Languages();
  });
  Status probed = daemon().Await(daemon().wired().service().ProbeLanguages(10s));
  asker.join();
  ASSERT_TRUE(probed.ok()) << probed.message();
  EXPECT_EQ(during, (std::map<std::string, std::string>{{"python", "3.11.2"}}));
}

// `go --version` is an error: each language is asked the way it answers.
TEST_F(LanguagesProbeTest, GoIsAskedForItsVersionItsOwnWay) {
  std::vector<std::vector<std::string>> asked;
  fake().RunPrograms([&asked](FakeProcess& p) -> awaitable<RunOutcome> {
    const auto& argv = p.payload().argv;
    asked.push_back(argv);
    if (argv == std::vector<std::string>{"/usr/bin/go", "version"}) {
      p.Stdout("go version go1.19.8 linux/amd64\n");
      co_return p.Exit(0);
    }
    if (argv.at(0) == "/usr/bin/go") co_return p.Exit(2);  // go: unknown subcommand
    p.Stdout("X 1.2.3\n");
    co_return p.Exit(0);
  });
  ASSERT_TRUE(Languages().count("go")) << "scripts/install-deps.sh installs golang-go";
  Status probed = daemon().Await(daemon().wired().service().ProbeLanguages(10s));
  ASSERT_TRUE(probed.ok()) << probed.message();
  EXPECT_EQ(Languages().at("go"), "1.19.8");
  EXPECT_EQ(Languages().at("bash"), "1.2.3");
  for (const auto& argv : asked) EXPECT_EQ(argv.size(), 2u);
}

}  // namespace
}  // namespace ci::daemon
