// The fork server (src/runtime/README.md "Fork server") through real sandboxes: a Python program
// runs in the interpreter the zygote loaded (no exec, its warm imports done, quietly), behaves as
// `python3 -c` does (exit status, SystemExit, tracebacks, KeyboardInterrupt, threads, atexit,
// unclosed files), gets its own random state, and pays nothing of the imports' CPU. The whole
// runtime suite also runs this way (runtime-fork-server), isolation checks included.
#include <fcntl.h>
#include <gmock/gmock.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "core/sleep.h"
#include "runtime/daemon/fork_server_client.h"
#include "runtime/wire/messages.h"
#include "runtime/wire/protocol.h"
#include "sandbox_fixture.h"

namespace ci::testing_support {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Sources the zygote compiles once (as the daemon's Python driver): a program with one of them runs
// that code object, and must behave exactly as when it compiles its own.
constexpr const char* kCompiledAhead =
    "import sys\n"
    "print('_ci_compiled' in vars(sys), '_ci_program' in vars(sys), __name__, sys.argv)\n"
    "def f():\n"
    "    raise KeyError('k')\n"
    "f()\n";
constexpr const char* kDoesNotCompile = "print('never')\ndef f(:\n";

class ForkServerTest : public SandboxTest {
 protected:
  void SetUp() override {
    if (Rootless() || ::geteuid() != 0) GTEST_SKIP() << "the fork server is for root";
    const char* shim = std::getenv("CI_TEST_SHIM");
    ASSERT_NE(shim, nullptr);
    runtime::LocalExecutorOptions opts;
    opts.shim_binary = shim;
    opts.fork_server = true;
    opts.warm_imports = {"this", "numpy.random", "no_such_module_x"};
    opts.compiled_ahead = {kCompiledAhead, kDoesNotCompile};
    opts.sandbox_env = DefaultSandboxEnv();
    executor_ = runtime::MakeLocalExecutor(io_.get_executor(), opts);
  }

  // The executor's figure `name` for /metrics; -1 when it has none.
  double Metric(const std::string& name) const {
    for (const BackendMetric& m : executor_->metrics()) {
      if (m.name == name) return m.value;
    }
    return -1;
  }

  Execution Py(const std::string& code, std::optional<std::string> stdin_data = std::nullopt) {
    RunPayload p = Python(code);
    p.stdin_data = std::move(stdin_data);
    return Execute(DefaultSpec(), std::move(p), CollectLimits{dir_.path()});
  }

  struct TempDir {
    TempDir() {
      char tmpl[] = "/tmp/fork-server-test-XXXXXX";
      path_ = ::mkdtemp(tmpl);
    }
    ~TempDir() { std::filesystem::remove_all(path_); }
    const std::string& path() const { return path_; }
    std::string path_;
  } dir_;
};

// The program's exit status; -1 when it had none, -2 when the run failed.
int Exit(Execution& ex) {
  if (!ex.outcome || !ex.outcome->ok()) return -2;
  return (*ex.outcome)->exit_code.value_or(-1);
}

TEST_F(ForkServerTest, TheProgramRunsInTheLoadedInterpreterWithItsImportsDone) {
  Execution ex =
      Py("import sys, time\n"
         "print(time.process_time() < 0.05, 'this' in sys.modules, 'numpy.random' in sys.modules)\n"
         "print(open('/proc/self/cmdline', 'rb').read().split(b'\\0')[1].decode())\n"
         "print(sys.argv, sys.orig_argv[:2], sys.path[0] == '', __name__)\n"
         "print(sorted(k for k in globals() if not k.startswith('__')))");
  EXPECT_EQ(Exit(ex), 0) << ex.err;
  // No exec: the process is the shim's fork (cmdline "code-interpreter shim"), and `import this`
  // printed its poem nowhere.
  EXPECT_EQ(ex.out,
            "True True True\nshim\n['-c'] ['python3', '-c'] True __main__\n['sys', 'time']\n");
  EXPECT_EQ(ex.err, "");
  EXPECT_LT((*ex.outcome)->cpu_ms, 200u);
}

TEST_F(ForkServerTest, ExitStatusesAreThoseOfPython) {
  Execution three = Py("import sys\nsys.exit(3)");
  EXPECT_EQ(Exit(three), 3);
  Execution message = Py("raise SystemExit('bye')");
  EXPECT_EQ(Exit(message), 1);
  EXPECT_EQ(message.err, "bye\n");
  Execution error = Py("def f():\n    raise KeyError('k')\nf()");
  EXPECT_EQ(Exit(error), 1);
  EXPECT_EQ(error.err,
            "Traceback (most recent call last):\n  File \"<string>\", line 3, in <module>\n"
            "  File \"<string>\", line 2, in f\nKeyError: 'k'\n");
  Execution interrupted = Py("import os, signal\nos.kill(os.getpid(), signal.SIGINT)");
  ASSERT_TRUE(interrupted.outcome && interrupted.outcome->ok());
  EXPECT_EQ((*interrupted.outcome)->signal, SIGINT);  // as python3: killed by SIGINT after it
  EXPECT_THAT(interrupted.err, HasSubstr("KeyboardInterrupt"));
}

TEST_F(ForkServerTest, ASourceCompiledAheadRunsAsItsOwnCompileWould) {
  for (int round = 0; round < 2; ++round) {  // the zygote's code object stays as it was
    Execution ahead = Py(kCompiledAhead);
    EXPECT_EQ(Exit(ahead), 1);
    EXPECT_EQ(ahead.out, "False False __main__ ['-c']\n");
    EXPECT_EQ(ahead.err,
              "Traceback (most recent call last):\n  File \"<string>\", line 5, in <module>\n"
              "  File \"<string>\", line 4, in f\nKeyError: 'k'\n");
  }
  // The zygote skipped what does not compile: the program reports it as python3 -c does.
  Execution broken = Py(kDoesNotCompile);
  EXPECT_EQ(Exit(broken), 1);
  EXPECT_EQ(broken.out, "");
  EXPECT_THAT(broken.err, HasSubstr("SyntaxError"));
  EXPECT_THAT(broken.err, HasSubstr("line 2"));
}

TEST_F(ForkServerTest, ThreadsAtexitAndUnclosedFilesFinishBeforeTheExit) {
  Execution ex =
      Py("import atexit, threading, time\n"
         "f = open('plain.txt', 'w')\n"
         "f.write('plain')\n"
         "class Holder: pass\n"
         "h = Holder(); h.me = h; h.f = open('cycle.txt', 'w'); h.f.write('cycle')\n"
         "def later():\n"
         "    time.sleep(0.2)\n"
         "    open('thread.txt', 'w').write('thread')\n"
         "threading.Thread(target=later).start()\n"
         "atexit.register(lambda: print('atexit ran'))\n");
  EXPECT_EQ(Exit(ex), 0) << ex.err;
  EXPECT_EQ(ex.out, "atexit ran\n");
  ASSERT_TRUE(ex.collection && ex.collection->ok());
  std::map<std::string, std::string> files;
  for (const auto& f : (*ex.collection)->files) {
    std::ifstream in(f.host_path);
    files[f.workspace_path] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  EXPECT_EQ(files, (std::map<std::string, std::string>{
                       {"cycle.txt", "cycle"}, {"plain.txt", "plain"}, {"thread.txt", "thread"}}));
}

TEST_F(ForkServerTest, EachProgramHasItsOwnRandomState) {
  const std::string code =
      "import numpy, random, os\nprint(numpy.random.rand(), random.random(), os.urandom(8).hex())";
  Execution a = Py(code), b = Py(code);
  EXPECT_EQ(Exit(a), 0) << a.err;
  EXPECT_EQ(Exit(b), 0) << b.err;
  EXPECT_NE(a.out, b.out);
  std::istringstream sa(a.out), sb(b.out);
  std::string na, nb, ra, rb;
  sa >> na >> ra;
  sb >> nb >> rb;
  EXPECT_NE(na, nb);  // numpy's global generator, seeded in the zygote, is seeded again
  EXPECT_NE(ra, rb);  // random's
}

TEST_F(ForkServerTest, StdinReachesTheProgram) {
  Execution ex = Py("import sys\nprint(sys.stdin.read().upper())", "abc\ndef");
  EXPECT_EQ(Exit(ex), 0) << ex.err;
  EXPECT_EQ(ex.out, "ABC\nDEF\n");
}

TEST_F(ForkServerTest, AnotherEnvironmentOrProgramRunsAnExec) {
  SandboxSpec spec = DefaultSpec();
  spec.env.push_back("EXTRA=1");
  RunPayload p = Python(
      "import sys, os\nprint(open('/proc/self/cmdline', 'rb').read().split(b'\\0')[0].decode(),"
      " os.environ['EXTRA'], 'this' in sys.modules)");
  Execution ex = Execute(spec, std::move(p));
  EXPECT_EQ(Exit(ex), 0) << ex.err;
  EXPECT_EQ(ex.out, "python3 1 False\n");
  Execution shell = Execute(DefaultSpec(), Shell("cat /proc/self/cmdline | tr '\\0' ' '"));
  EXPECT_EQ(shell.out, "cat /proc/self/cmdline ");
}

TEST_F(ForkServerTest, TheZygoteIsOutOfTheProgramsReach) {
  // Only init and the program are in its pid namespace; nothing names the zygote.
  Execution ex = Py("import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))");
  EXPECT_EQ(Exit(ex), 0) << ex.err;
  EXPECT_EQ(ex.out, "[1, 2]\n");
}

}  // namespace
}  // namespace ci::testing_support

namespace ci::testing_support {
namespace {

// The zygotes' pids: the children of this test process whose command line says "fork".
std::vector<pid_t> Zygotes() {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string pid, comm, state;
    pid_t ppid = 0;
    stat >> pid >> comm >> state >> ppid;
    const std::string args = ReadFileOrEmpty(entry.path() / "cmdline");
    if (ppid == ::getpid() && args == std::string("code-interpreter\0fork\0", 22)) {
      out.push_back(std::stoi(name));
    }
  }
  return out;
}

// The executor's zygote (the only one).
pid_t FindZygote() {
  std::vector<pid_t> all = Zygotes();
  return all.size() == 1 ? all[0] : 0;
}

// The descriptors open in a process.
int CountFds(pid_t pid) {
  int n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    ++n;
  }
  return n;
}

// The stage of the setup failure the sandbox's service socket reports, then its EOF: "" when not
// so.
std::string SetupFailureStage(const runtime::UniqueFd& service) {
  const int flags = ::fcntl(service.get(), F_GETFL);
  ::fcntl(service.get(), F_SETFL, flags & ~O_NONBLOCK);
  runtime::proto::Msg type;
  std::string payload;
  runtime::proto::SetupError error;
  if (runtime::proto::ReadFrame(service.get(), &type, &payload) != 0 ||
      type != runtime::proto::Msg::kSetupError || !runtime::proto::Decode(payload, &error)) {
    return "";
  }
  char byte;
  return ::read(service.get(), &byte, 1) == 0 ? error.stage : "";
}

// A sandbox whose plan never comes (the daemon closed its lifecycle socket first), or comes
// malformed, or is not a plan: the zygote reports it on the service socket as a shim would, keeps
// nothing of it (no descriptor, no cgroup, no process) and serves the next one.
TEST_F(ForkServerTest, ASandboxWithoutAValidPlanIsDroppedAndTheZygoteServesOn) {
  const std::vector<pid_t> others = Zygotes();
  auto started = runtime::ForkServer::Start(io_.get_executor(), std::getenv("CI_TEST_SHIM"),
                                            DefaultSandboxEnv(), {}, {});
  ASSERT_TRUE(started.ok()) << started.status().message();
  std::unique_ptr<runtime::ForkServer> server = std::move(started).value();
  pid_t zygote = 0;
  for (pid_t pid : Zygotes()) {
    if (std::find(others.begin(), others.end(), pid) == others.end()) zygote = pid;
  }
  ASSERT_GT(zygote, 0);
  const int fds_between = CountFds(zygote);  // between requests it holds no sandbox's
  const std::vector<std::string> cgroups_before = ListEmptyCgroups();
  using Send = std::function<void(int lifecycle)>;
  const std::vector<std::pair<std::string, Send>> cases = {
      {"no plan", [](int) {}},
      {"not JSON", [](int fd) { runtime::proto::WriteFrame(fd, runtime::proto::Msg::kPlan, "{"); }},
      {"not a plan",
       [](int fd) { runtime::proto::WriteFrame(fd, runtime::proto::Msg::kKill, ""); }},
  };
  for (const auto& [name, send] : cases) {
    auto sandbox = Await(server->NewSandbox());
    ASSERT_TRUE(sandbox.ok()) << name << ": " << sandbox.status().message();
    EXPECT_EQ(sandbox->pid, 0) << name;
    send(sandbox->lifecycle.get());
    sandbox->lifecycle.reset();
    EXPECT_EQ(SetupFailureStage(sandbox->service), "plan") << name;
    // The service socket's EOF came as the zygote dropped the sandbox; the rest of it goes next.
    for (int i = 0; i < 100 && CountFds(zygote) != fds_between; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    EXPECT_EQ(CountFds(zygote), fds_between) << name;
  }
  EXPECT_TRUE(server->Ready());
  EXPECT_EQ(CgroupsLeakedSince(cgroups_before), std::vector<std::string>{});
}

// The zygote is the parent of its sandboxes: its death takes them (init's death signal), a
// pooled one reads as dead (Alive(), so a warm pool replaces it), its teardown does not hang, the
// next Python program runs an exec, and their cgroups are removed then, not left for a restart.
TEST_F(ForkServerTest, AZygotesDeathTakesItsSandboxesAndTheirCgroups) {
  auto prepared = Await(executor_->Prepare(DefaultSpec()));
  ASSERT_TRUE(prepared.ok()) << prepared.status().message();
  std::unique_ptr<Sandbox> sandbox = std::move(prepared.value());
  EXPECT_TRUE(sandbox->Alive());
  const pid_t zygote = FindZygote();
  ASSERT_GT(zygote, 0);
  const std::string prefix = std::to_string(zygote) + "-";
  auto named_by_zygote = [&] {
    // Error codes, not exceptions: other sandboxes' and containers' cgroups come and go.
    int n = 0;
    std::error_code ec;
    namespace fs = std::filesystem;
    for (fs::recursive_directory_iterator
             it("/sys/fs/cgroup", fs::directory_options::skip_permission_denied, ec),
         end;
         !ec && it != end; it.increment(ec)) {
      if (it->is_directory(ec) && it->path().filename().string().rfind(prefix, 0) == 0) ++n;
    }
    return n;
  };
  EXPECT_GT(named_by_zygote(), 0);
  ASSERT_EQ(::kill(zygote, SIGKILL), 0);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (sandbox->Alive() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_FALSE(sandbox->Alive());
  const auto destroy_start = std::chrono::steady_clock::now();
  Await(sandbox->Destroy());
  EXPECT_LT(std::chrono::steady_clock::now() - destroy_start, 4s) << "the 5 s guard was needed";
  Execution ex = Py("print(open('/proc/self/cmdline', 'rb').read().split(b'\\0')[1].decode())");
  EXPECT_EQ(Exit(ex), 0) << ex.err;
  EXPECT_EQ(ex.out, "-c\n");
  EXPECT_EQ(named_by_zygote(), 0);
}

// A zygote that died is replaced, on the event loop: the Python program right after it runs an
// exec (the restart is under way, 1 s after a zygote that lived less than a minute), then programs
// run in the new zygote's interpreter. Twice: the restarted one is itself restarted.
TEST_F(ForkServerTest, AZygoteThatDiedIsRestartedAndPythonExecsMeanwhile) {
  const std::string code =
      "print(open('/proc/self/cmdline', 'rb').read().split(b'\\0')[1].decode())";
  for (int death = 1; death <= 2; ++death) {
    SCOPED_TRACE("death " + std::to_string(death));
    const pid_t zygote = FindZygote();
    ASSERT_GT(zygote, 0);
    ASSERT_EQ(::kill(zygote, SIGKILL), 0);
    Execution ex = Py(code);  // its Prepare finds the zygote gone, and spawns a shim instead
    EXPECT_EQ(Exit(ex), 0) << ex.err;
    EXPECT_EQ(ex.out, "-c\n");
    EXPECT_EQ(Metric("code_interpreter_fork_server_up"), 0);
    EXPECT_EQ(Metric("code_interpreter_fork_server_restarts_total"), death - 1);
    std::string where;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (where != "shim\n" && std::chrono::steady_clock::now() < deadline) {
      Await(Sleep(200ms));  // the restart runs on this loop
      Execution again = Py(code);
      ASSERT_EQ(Exit(again), 0) << again.err;
      where = again.out;
    }
    EXPECT_EQ(where, "shim\n") << "no program ran in a restarted zygote within 30 s";
    const pid_t restarted = FindZygote();
    EXPECT_GT(restarted, 0);
    EXPECT_NE(restarted, zygote);
    EXPECT_EQ(Metric("code_interpreter_fork_server_up"), 1);
    EXPECT_EQ(Metric("code_interpreter_fork_server_restarts_total"), death);
  }
}

}  // namespace
}  // namespace ci::testing_support
