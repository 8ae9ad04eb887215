// The fork server (src/runtime/README.md "Fork server") through real sandboxes: a Python program
// runs in the interpreter the zygote loaded (no exec, its warm imports done, quietly), behaves as
// `python3 -c` does (exit status, SystemExit, tracebacks, KeyboardInterrupt, threads, atexit,
// unclosed files), gets its own random state, and pays nothing of the imports' CPU. The whole
// runtime suite also runs this way (runtime-fork-server), isolation checks included.
#include <gmock/gmock.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

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

// The zygote's pid: the child of this test process whose command line says "fork".
pid_t FindZygote() {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string pid, comm, state;
    pid_t ppid = 0;
    stat >> pid >> comm >> state >> ppid;
    std::ifstream cmdline(entry.path() / "cmdline");
    std::string args(std::istreambuf_iterator<char>(cmdline), {});
    if (ppid == ::getpid() && args == std::string("code-interpreter\0fork\0", 22)) {
      return std::stoi(name);
    }
  }
  return 0;
}

TEST_F(ForkServerTest, AZygoteThatDiedLeavesPythonToAnExec) {
  pid_t zygote = FindZygote();
  ASSERT_GT(zygote, 0);
  ASSERT_EQ(::kill(zygote, SIGKILL), 0);
  const std::string code =
      "print(open('/proc/self/cmdline', 'rb').read().split(b'\\0')[1].decode())";
  Execution ex = Py(code);  // the first Prepare finds it gone, and spawns its shim instead
  EXPECT_EQ(Exit(ex), 0) << ex.err;
  EXPECT_EQ(ex.out, "-c\n");
  Execution again = Py(code);
  EXPECT_EQ(again.out, "-c\n");
}

}  // namespace
}  // namespace ci::testing_support
