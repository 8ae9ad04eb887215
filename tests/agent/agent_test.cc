// The real agent binary (src/agent) as PID 1 of fresh pid, mount and IPC namespaces, driven over
// pipes the way the daemon drives it over a container's attach stream.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "agent/agent_as_init.h"
#include "agent/agent_wire.h"
#include "common/hard_to_kill.h"
#include "daemon/service/python_program.h"

namespace ci::agent {
namespace {

struct Ran {
  bool started = false;
  std::string not_started;  // kNotStarted's reason
  std::string out, err;
  int status = -1000;
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "namespaces of its own need root";
    Start({});
  }
  void TearDown() override {
    if (pid_ > 0) {
      if (to_agent_ >= 0) ::close(to_agent_);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (from_agent_ >= 0) ::close(from_agent_);
  }

  // `uid`: the agent runs as that user (and group), as in a container; 0: root.
  void Start(const std::vector<std::string>& args, uid_t uid = 0) {
    const AgentProcess agent = StartAgentAsInit(args, uid);
    ASSERT_GE(agent.pid, 0);
    pid_ = agent.pid;
    to_agent_ = agent.to_agent;
    from_agent_ = agent.from_agent;
    Msg type;
    std::string payload;
    ASSERT_TRUE(Next(&type, &payload));
    ASSERT_EQ(type, Msg::kReady);
    EXPECT_EQ(payload, WithId(kWireVersion));
  }

  void Send(Msg type, std::string_view payload) {
    std::string f = Frame(type, payload);
    ASSERT_EQ(::write(to_agent_, f.data(), f.size()), static_cast<ssize_t>(f.size()));
  }

  // The next frame from the agent within `timeout_ms`.
  bool Next(Msg* type, std::string* payload, int timeout_ms = 10000) {
    bool bad = false;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!reader_.Next(type, payload, &bad)) {
      if (bad || std::chrono::steady_clock::now() > deadline) return false;
      pollfd p{from_agent_, POLLIN, 0};
      if (::poll(&p, 1, std::min(timeout_ms, 1000)) <= 0) continue;
      char buf[65536];
      ssize_t n = ::read(from_agent_, buf, sizeof buf);
      if (n <= 0) return false;
      reader_.Feed(std::string_view(buf, static_cast<size_t>(n)));
    }
    return true;
  }

  uint32_t StartExec(std::vector<std::string> argv, bool attach_stdin = false) {
    uint32_t id = next_id_++;
    Send(Msg::kExec, EncodeExec({id, attach_stdin, "/", std::move(argv), {"CI_AGENT_TEST=1"}}));
    return id;
  }

  // Reads frames until exec `id` exited; other execs' frames are kept for their own Wait.
  Ran Wait(uint32_t id) {
    while (ran_[id].status == -1000) {
      Msg type;
      std::string payload;
      if (!Next(&type, &payload)) {
        ADD_FAILURE() << "no answer from the agent";
        break;
      }
      if (type == Msg::kStarted) {
        auto started = SplitId(payload);
        EXPECT_TRUE(started && started->second.empty());
        if (started) {
          EXPECT_EQ(ran_[started->first].out + ran_[started->first].err, "")
              << "an exec's start comes before its output";
          ran_[started->first].started = true;
        }
      } else if (type == Msg::kOutput) {
        auto o = DecodeOutput(payload);
        EXPECT_TRUE(o);
        if (o) (o->stream == 1 ? ran_[o->id].out : ran_[o->id].err) += o->bytes;
      } else if (type == Msg::kNotStarted) {
        auto why = SplitId(payload);
        EXPECT_TRUE(why);
        if (why) {
          ran_[why->first].not_started = std::string(why->second);
          ran_[why->first].status = -1;
        }
      } else if (type == Msg::kExited) {
        auto e = DecodeExited(payload);
        EXPECT_TRUE(e);
        if (e) {
          EXPECT_TRUE(ran_[e->first].started) << "exited before it was said to have started";
          ran_[e->first].status = e->second;
        }
      } else {
        ADD_FAILURE() << "unexpected frame type " << static_cast<int>(type);
      }
    }
    return ran_[id];
  }

  Ran Run(std::vector<std::string> argv) { return Wait(StartExec(std::move(argv))); }

  // The daemon's Python fork server (python_program.h), as the Docker executor starts it.
  void StartZygote() {
    Send(Msg::kZygote,
         EncodeExec({0, false, "/", daemon::PythonZygoteArgv({"json"}), {"CI_AGENT_TEST=1"}}));
  }

  // `python3 -c source args...` forked by the fork server.
  uint32_t StartForked(const std::string& source, std::vector<std::string> args = {},
                       bool attach_stdin = false) {
    uint32_t id = next_id_++;
    std::vector<std::string> argv = {"python3", "-c", source};
    argv.insert(argv.end(), args.begin(), args.end());
    Send(Msg::kExec,
         EncodeExec({id, attach_stdin, "/tmp", std::move(argv), {"CI_FORKED=yes"}, true}));
    return id;
  }
  Ran Forked(const std::string& source) { return Wait(StartForked(source)); }

  // kWriteFiles into `dir`: the agent's answer (empty: written); no other frame may come first.
  std::string WriteFiles(const std::string& dir,
                         std::vector<std::pair<std::string, std::string>> files) {
    uint32_t id = next_id_++;
    Send(Msg::kWriteFiles, EncodeWriteFiles({id, dir, std::move(files)}));
    Msg type;
    std::string payload;
    if (!Next(&type, &payload)) return "no answer from the agent";
    auto answer = SplitId(payload);
    if (type != Msg::kFilesWritten || !answer || answer->first != id) return "another frame";
    return std::string(answer->second);
  }

  // kReadCounters' answer (frames of execs before it are dropped).
  std::string ReadCounters(uint8_t extras) {
    uint32_t id = next_id_++;
    Send(Msg::kReadCounters, WithId(id, std::string(1, static_cast<char>(extras))));
    Msg type;
    std::string payload;
    while (Next(&type, &payload)) {
      auto answer = SplitId(payload);
      if (type == Msg::kCountersRead && answer && answer->first == id) {
        return std::string(answer->second);
      }
    }
    ADD_FAILURE() << "no answer from the agent";
    return "";
  }

  // kListDir's answer.
  DirListing ListDir(const std::string& path) {
    uint32_t id = next_id_++;
    Send(Msg::kListDir, WithId(id, path));
    Msg type;
    std::string payload;
    if (!Next(&type, &payload) || type != Msg::kDirListed) return {0, {}, "no answer"};
    auto l = DecodeDirListed(payload);
    if (!l || l->id != id) return {0, {}, "another answer"};
    return *l;
  }

  pid_t pid_ = -1;
  int to_agent_ = -1, from_agent_ = -1;
  FrameReader reader_;
  uint32_t next_id_ = 1;
  std::map<uint32_t, Ran> ran_;
};

TEST_F(AgentTest, AnExecGetsItsStdinAndItsOutputAndStatusComeBack) {
  uint32_t id = StartExec({"sh", "-c", "cat; echo \"err $CI_AGENT_TEST\" >&2; exit 3"}, true);
  Send(Msg::kStdin, WithId(id, "hello "));
  Send(Msg::kStdin, WithId(id, "agent"));
  Send(Msg::kStdinEnd, WithId(id));
  Ran r = Wait(id);
  EXPECT_EQ(r.out, "hello agent");
  EXPECT_EQ(r.err, "err 1\n");
  EXPECT_EQ(r.status, 3);
}

// A daemon that attached after the agent's start (a pod's) missed its first kReady: it asks.
TEST_F(AgentTest, AHelloIsAnsweredByReadyAgain) {
  for (int i = 0; i < 2; ++i) {
    Send(Msg::kHello, {});
    Msg type;
    std::string payload;
    ASSERT_TRUE(Next(&type, &payload));
    EXPECT_EQ(type, Msg::kReady);
    EXPECT_EQ(payload, WithId(kWireVersion));
  }
  EXPECT_EQ(Run({"sh", "-c", "exit 3"}).status, 3);  // and it serves on
}

// As a `docker exec`'s process (runc): the sandbox shell's kills and signals (a process's group,
// sessions spared by id) count on it.
TEST_F(AgentTest, AnExecLeadsASessionAndProcessGroupOfItsOwn) {
  Ran r = Run({"sh", "-c",
               "read -r pid comm state ppid pgrp sid rest </proc/$$/stat; "
               "echo $((pid == pgrp)) $((pid == sid))"});
  EXPECT_EQ(r.out, "1 1\n");
}

TEST_F(AgentTest, WithoutStdinTheProgramReadsEof) {
  Ran r = Run({"sh", "-c", "cat; echo done"});
  EXPECT_EQ(r.out, "done\n");
  EXPECT_EQ(r.status, 0);
}

TEST_F(AgentTest, AMissingProgramIs127WithAMessageAsDockerExecSaysIt) {
  Ran r = Run({"no-such-program-anywhere"});
  EXPECT_EQ(r.status, 127);
  EXPECT_NE(r.err.find("no-such-program-anywhere"), std::string::npos) << r.err;
}

TEST_F(AgentTest, ADeathBySignalIs128PlusTheSignal) {
  EXPECT_EQ(Run({"sh", "-c", "kill -9 $$"}).status, 128 + SIGKILL);
}

TEST_F(AgentTest, OutputBeyondAPipeBufferArrivesWhole) {
  Ran r = Run({"head", "-c", "3000000", "/dev/zero"});
  EXPECT_EQ(r.out.size(), 3000000u);
  EXPECT_EQ(r.status, 0);
}

TEST_F(AgentTest, ConcurrentExecsKeepTheirOutputApart) {
  uint32_t a = StartExec({"sh", "-c", "for i in 1 2 3; do echo a$i; sleep 0.05; done"});
  uint32_t b = StartExec({"sh", "-c", "for i in 1 2 3; do echo b$i; sleep 0.05; done"});
  EXPECT_EQ(Wait(b).out, "b1\nb2\nb3\n");
  EXPECT_EQ(Wait(a).out, "a1\na2\na3\n");
}

TEST_F(AgentTest, OrphansAreReapedAsByAnInit) {
  EXPECT_EQ(Run({"sh", "-c", "sleep 0.2 & exit 0"}).status, 0);
  ::usleep(600'000);
  Ran r = Run({"sh", "-c", "grep -l '^State:.Z' /proc/[0-9]*/status | wc -l"});
  EXPECT_EQ(r.out, "0\n");
}

TEST_F(AgentTest, KillAllEndsEveryProgramButSparesTheAgent) {
  uint32_t sleeper = StartExec({"sleep", "100"});
  uint32_t other = StartExec({"sh", "-c", "sleep 100"});
  ::usleep(200'000);
  Send(Msg::kKillAll, {});
  EXPECT_EQ(Wait(sleeper).status, 128 + SIGKILL);
  EXPECT_EQ(Wait(other).status, 128 + SIGKILL);
  EXPECT_EQ(Run({"echo", "still here"}).out, "still here\n");
}

TEST_F(AgentTest, ARecycleIsRefusedWhileAWritablePlaceIsNotWiped) {
  // The test's root file system is writable and no --wipe was given: nothing could be put back
  // as it was, so the container must not be reused.
  Send(Msg::kRecycle, {});
  Msg type;
  std::string payload;
  ASSERT_TRUE(Next(&type, &payload));
  ASSERT_EQ(type, Msg::kRecycled);
  ASSERT_FALSE(payload.empty());
  EXPECT_EQ(payload[0], 0);
  EXPECT_NE(payload.find("writable mount not wiped"), std::string::npos) << payload;
}

TEST_F(AgentTest, ARecycleIsRefusedWhenAProgramChangedTheAgent) {
  // As in a container: the program is the agent's user, so it may renice the agent or change its
  // scheduling; the next execution must not inherit that.
  // sched_setattr (314) with a custom time slice (sched_runtime) for SCHED_OTHER: no field of
  // /proc/PID/stat shows it.
  const std::string slice =
      "import ctypes, struct\n"
      "attr = struct.pack('IIQiIQQQII', 56, 0, 0, 0, 0, 10_000_000, 0, 0, 0, 0)\n"
      "assert ctypes.CDLL(None).syscall(314, 1, attr, 0) == 0";
  for (const std::string& change :
       {std::string("os.setpriority(os.PRIO_PROCESS, 1, 7)"),
        std::string("os.sched_setscheduler(1, os.SCHED_IDLE, os.sched_param(0))"), slice}) {
    TearDown();
    Start({}, 65534);
    Ran r = Run({"python3", "-c", std::string("import os\n") + change});
    ASSERT_EQ(r.status, 0) << change << ": " << r.err;
    Send(Msg::kRecycle, {});
    Msg type;
    std::string payload;
    ASSERT_TRUE(Next(&type, &payload));
    ASSERT_EQ(type, Msg::kRecycled);
    ASSERT_FALSE(payload.empty());
    EXPECT_EQ(payload[0], 0) << change;
    EXPECT_NE(payload.find("the agent itself was changed: "), std::string::npos)
        << change << ": " << payload;
  }
}

TEST_F(AgentTest, TheEndOfTheDaemonsStreamEndsEverything) {
  StartExec({"sleep", "100"});
  ::usleep(100'000);
  ::close(to_agent_);
  to_agent_ = -1;
  int status = 0;
  ASSERT_EQ(::waitpid(pid_, &status, 0), pid_);
  pid_ = -1;
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// Prints the pids of the fork server (the python3 processes but the program itself).
// (A process may end between the listing and the read: the fork server's intermediate child.)
constexpr const char* kZygotePids =
    "import os\n"
    "def argv0(p):\n"
    "    try:\n"
    "        return open(f'/proc/{p}/cmdline', 'rb').read().split(b'\\0')[0]\n"
    "    except OSError:\n"
    "        return b''\n"
    "print([p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid() and\n"
    "       argv0(p).endswith(b'python3')])";

TEST_F(AgentTest, AForkedProgramHasItsOwnStdioCwdEnvironmentArgvAndStatus) {
  StartZygote();
  uint32_t id = StartForked(
      "import os, sys\n"
      "print(input(), os.getcwd(), os.environ['CI_FORKED'], 'CI_AGENT_TEST' in os.environ,\n"
      "      sys.argv, sys.orig_argv[3:], __name__, 'json' in sys.modules, os.getppid())\n"
      "print('to stderr', file=sys.stderr)\n"
      "sys.exit(3)",
      {"a", "b"}, true);
  Send(Msg::kStdin, WithId(id, "hello\n"));
  Send(Msg::kStdinEnd, WithId(id));
  Ran r = Wait(id);
  EXPECT_EQ(r.not_started, "");
  // The environment is the exec's (the agent's and the request's), not the fork server's.
  EXPECT_EQ(r.out, "hello /tmp yes False ['-c', 'a', 'b'] ['a', 'b'] __main__ True 1\n");
  EXPECT_EQ(r.err, "to stderr\n");
  EXPECT_EQ(r.status, 3);
  // An uncaught exception: Python's own traceback and status.
  r = Forked("raise ValueError('boom')");
  EXPECT_NE(r.err.find("ValueError: boom"), std::string::npos) << r.err;
  EXPECT_EQ(r.status, 1);
}

TEST_F(AgentTest, WhatAForkedProgramLeavesIsKilledAndTheForkServerIsSpared) {
  StartZygote();
  Ran first = Forked(kZygotePids);
  ASSERT_EQ(first.status, 0) << first.err;
  // A child holding the program's stdout would keep the exec open: it is killed at the exit.
  Ran r = Forked("import subprocess\nsubprocess.Popen(['sleep', '100'])\nprint('left')");
  EXPECT_EQ(r.out, "left\n");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(Run({"sh", "-c", "pgrep -x sleep | wc -l"}).out, "0\n");
  EXPECT_EQ(Forked(kZygotePids).out, first.out) << "the same fork server serves on";
}

TEST_F(AgentTest, WhatAForkedProgramLeavesIsKilledWhateverItsNameOrState) {
  StartZygote();
  Ran r = Forked(testing_support::kHardToKill);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(Run({"python3", "-c", testing_support::kHardToKillLeft}).out, "0\n");
}

// Kill first, check after: a leftover alive during the checks could change the agent or the fork
// server once they are done. Here the recycle is refused (the test's root file system is
// writable), after the kill.
TEST_F(AgentTest, ARecycleKillsEveryLeftoverBeforeItChecksAnything) {
  Ran r = Run({"python3", "-c", testing_support::kHardToKill});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(Run({"python3", "-c", testing_support::kHardToKillLeft}).out, "3\n") << "the control";
  Send(Msg::kRecycle, {});
  Msg type;
  std::string payload;
  ASSERT_TRUE(Next(&type, &payload));
  ASSERT_EQ(type, Msg::kRecycled);
  EXPECT_EQ(Run({"python3", "-c", testing_support::kHardToKillLeft}).out, "0\n");
}

TEST_F(AgentTest, NoProgramOfTheSandboxReadsTheForkServer) {
  TearDown();  // again as the programs' user, as in a container
  Start({}, 65534);
  StartZygote();
  Ran pids = Forked(kZygotePids);
  ASSERT_EQ(pids.status, 0) << pids.err;
  ASSERT_GT(pids.out.size(), 4u) << "no fork server found";
  const std::string zygote = pids.out.substr(2, pids.out.find('\'', 2) - 2);
  // Non-dumpable: no ptrace-mode access to its environment (nor its memory or descriptors),
  // from an exec'd program or a forked one, though all run as the same user; a process of that
  // user that did not say so is readable (the check can fail).
  // The control reads its own shell's (waiting for it, past its exec): a background process read
  // at once may be between its fork and its exec, when its environ reads empty.
  Ran exec = Run({"sh", "-c", "cat /proc/" + zygote + "/environ; cat /proc/$$/environ"});
  EXPECT_NE(exec.err.find("Permission denied"), std::string::npos) << exec.err;
  EXPECT_NE(exec.out.find("CI_AGENT_TEST=1"), std::string::npos) << "the control";
  Ran forked = Forked("try:\n    open('/proc/" + zygote +
                      "/environ').read()\n"
                      "except PermissionError:\n    print('denied')");
  EXPECT_EQ(forked.out, "denied\n") << forked.err;
  Ran dumpable = Forked("import ctypes\nprint(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))");
  EXPECT_EQ(dumpable.out, "1\n") << "a forked program is dumpable again, as an exec'd one";
}

TEST_F(AgentTest, WithoutAForkServerAForkedExecIsNotStarted) {
  Ran r = Forked("print(1)");
  EXPECT_EQ(r.status, -1);
  EXPECT_EQ(r.not_started, "no fork server");
  StartZygote();
  Ran pids = Forked(kZygotePids);
  ASSERT_EQ(pids.status, 0) << pids.err;
  const std::string zygote = pids.out.substr(2, pids.out.find('\'', 2) - 2);
  Run({"kill", "-9", zygote});
  ::usleep(200'000);
  r = Forked("print(1)");
  EXPECT_EQ(r.status, -1);
  EXPECT_NE(r.not_started, "") << "a killed fork server refuses, the daemon starts the program";
}

TEST_F(AgentTest, AForkServerThatDoesNotAnswerIsKilledAndItsExecFails) {
  TearDown();  // again as the programs' user, who can stop the server
  Start({"--fork-timeout-ms", "1000"}, 65534);
  StartZygote();
  // Stopped by an exec'd program (the bracket keeps the shell's own command line unmatched).
  Ran stop = Run({"sh", "-c",
                  "for i in $(seq 200); do p=$(pgrep -f '_ci_zygot[e]') && break; sleep 0.05; "
                  "done; kill -STOP $p && echo stopped"});
  ASSERT_EQ(stop.out, "stopped\n") << stop.err;
  const auto t0 = std::chrono::steady_clock::now();
  Ran r = Forked("print(1)");
  EXPECT_EQ(r.status, -1);
  EXPECT_EQ(r.not_started, "the fork server did not answer within 1000 ms");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1000));
  EXPECT_EQ(Run({"echo", "served"}).out, "served\n") << "the agent serves on";
  EXPECT_EQ(Forked("print(1)").not_started, "no fork server") << "the server was killed";
}

TEST_F(AgentTest, FilesAreWrittenByTheAgentAsItsUserWithoutAnExec) {
  TearDown();  // again as the programs' user, as in a container
  Start({}, 65534);
  char dir_template[] = "/tmp/agent-files-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
  auto read = [&](const std::string& name) {
    std::string out;
    int fd = ::open((dir + "/" + name).c_str(), O_RDONLY | O_CLOEXEC);
    char buf[4096];
    for (ssize_t n; fd >= 0 && (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, n);
    if (fd >= 0) ::close(fd);
    return out;
  };
  const std::string binary("a\0b\xff\n", 5);
  EXPECT_EQ(WriteFiles(dir, {{"main.py", "print(1)\n"}, {"data.bin", binary}, {"empty", ""}}), "");
  EXPECT_EQ(read("main.py"), "print(1)\n");
  EXPECT_EQ(read("data.bin"), binary);
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/main.py").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u) << "written as the agent's user, as the program's own files";
  const mode_t umask_now = ::umask(022);
  ::umask(umask_now);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~umask_now) << "as a shell's > makes it";
  EXPECT_EQ(WriteFiles(dir, {{"main.py", "x"}}), "");
  EXPECT_EQ(read("main.py"), "x") << "an existing file is replaced whole";
  // Not followed: a link in the file's place (a session's program could make one).
  ASSERT_EQ(::symlink((dir + "/data.bin").c_str(), (dir + "/link").c_str()), 0);
  EXPECT_NE(WriteFiles(dir, {{"link", "over"}}).find("link: "), std::string::npos);
  EXPECT_EQ(read("data.bin"), binary);
  for (const char* bad : {"../escape", "a/b", "..", ".", ""}) {
    EXPECT_EQ(WriteFiles(dir, {{bad, "x"}}), std::string(bad) + ": not a file name") << bad;
  }
  // Not the agent's to write: named in the answer, and the agent serves on.
  ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);
  EXPECT_EQ(WriteFiles(dir, {{"new", "x"}}), "new: Permission denied");
  EXPECT_NE(WriteFiles(dir + "/missing", {{"a", "x"}}).find("/missing: No such file"),
            std::string::npos);
  EXPECT_EQ(Run({"true"}).status, 0);
  ::chmod(dir.c_str(), 0755);
  for (const char* name : {"main.py", "data.bin", "empty", "link"})
    ::unlink((dir + "/" + name).c_str());
  ::rmdir(dir.c_str());
}

// The counters a pod's daemon reads after each execution and twice per session call, read by the
// agent itself: no process started (no kStarted), the programs' CPU in them.
TEST_F(AgentTest, CountersAreReadByTheAgentWithTheProgramsCpuAndNoProcess) {
  std::string text = ReadCounters(kProcessesCpu | kCountProcesses);
  EXPECT_NE(text.find("@procs.cpu\n"), std::string::npos) << text;
  if (::access("/sys/fs/cgroup/cgroup.procs", R_OK) == 0) {
    EXPECT_NE(text.find("@cgroup.procs\n"), std::string::npos) << text;
  }
  StartExec({"python3", "-c",
             "import time\nt = time.process_time()\n"
             "while time.process_time() - t < 0.3: pass\ntime.sleep(60)"});
  auto ticks = [&] {
    const std::string t = ReadCounters(kProcessesCpu);
    const size_t at = t.find("@procs.cpu\n");
    return at == std::string::npos ? -1 : std::atol(t.c_str() + at + 11);
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  long seen = ticks();
  while (seen < 30 && std::chrono::steady_clock::now() < deadline) {
    ::usleep(50000);
    seen = ticks();
  }
  EXPECT_GE(seen, 30) << "300 ms of the program's CPU, in clock ticks";
  EXPECT_EQ(ReadCounters(0).find("@procs.cpu"), std::string::npos) << "only when asked";
}

// Whether a pod's workspace holds anything to collect, told by the agent: an empty directory,
// its first entries (at most kMaxListed) with their types, and a link in its place refused.
TEST_F(AgentTest, ADirectoryIsListedByTheAgentWithoutAnExec) {
  char dir_template[] = "/tmp/agent-list-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  DirListing l = ListDir(dir);
  EXPECT_EQ(l.why, "");
  EXPECT_TRUE(l.entries.empty());
  ASSERT_EQ(::mkdir((dir + "/sub").c_str(), 0755), 0);
  for (int i = 0; i < 20; ++i) ::close(::creat((dir + "/f" + std::to_string(i)).c_str(), 0644));
  l = ListDir(dir);
  EXPECT_EQ(l.why, "");
  EXPECT_EQ(l.entries.size(), kMaxListed);
  ASSERT_EQ(::symlink((dir + "/sub").c_str(), (dir + "/link").c_str()), 0);
  l = ListDir(dir + "/sub");
  EXPECT_TRUE(l.why.empty() && l.entries.empty()) << l.why;
  EXPECT_NE(ListDir(dir + "/link").why, "") << "not followed";
  EXPECT_NE(ListDir(dir + "/missing").why.find("No such file"), std::string::npos);
  EXPECT_EQ(Run({"true"}).status, 0);  // and it serves on
  for (int i = 0; i < 20; ++i) ::unlink((dir + "/f" + std::to_string(i)).c_str());
  ::unlink((dir + "/link").c_str());
  ::rmdir((dir + "/sub").c_str());
  ::rmdir(dir.c_str());
}

// A daemon that acknowledges output (its hello says so) holds each exec's unread output to the
// window: the rest waits in the program's pipe, and the program with it, until the reader takes
// what came; kOutputAckAll lets the rest go. Without that hello nothing is held (older daemons).
TEST_F(AgentTest, AnExecsUnreadOutputIsHeldToTheWindowUntilAcknowledged) {
  constexpr size_t kTotal = 8u << 20;
  auto drain = [&](uint32_t id, size_t* got, bool* exited, int quiet_ms) {
    Msg type;
    std::string payload;
    while (Next(&type, &payload, quiet_ms)) {
      if (type == Msg::kOutput) *got += DecodeOutput(payload)->bytes.size();
      if (type == Msg::kExited && DecodeExited(payload)->first == id) *exited = true;
    }
  };
  const std::string bytes = std::to_string(kTotal);
  uint32_t id = StartExec({"head", "-c", bytes, "/dev/zero"});
  size_t got = 0;
  bool exited = false;
  drain(id, &got, &exited, 1000);
  EXPECT_EQ(got, kTotal) << "no window for a daemon that did not say it acknowledges";
  EXPECT_TRUE(exited);

  Send(Msg::kHello, WithId(kWireVersion));
  Msg type;
  std::string payload;
  ASSERT_TRUE(Next(&type, &payload));
  ASSERT_EQ(type, Msg::kReady);
  id = StartExec({"head", "-c", bytes, "/dev/zero"});
  got = 0;
  exited = false;
  drain(id, &got, &exited, 1000);
  EXPECT_GE(got, kOutputWindow / 2);
  EXPECT_LE(got, kOutputWindow + (64u << 10)) << "at most the window and one read";
  EXPECT_FALSE(exited) << "the program waits on its full pipe";
  size_t acked = got;
  Send(Msg::kOutputAck, EncodeAck(id, static_cast<uint32_t>(got)));
  drain(id, &got, &exited, 1000);
  EXPECT_GT(got, acked) << "the window moved";
  EXPECT_LE(got, acked + kOutputWindow + (64u << 10));
  EXPECT_FALSE(exited);
  Send(Msg::kOutputAck, EncodeAck(id, kOutputAckAll));
  drain(id, &got, &exited, 1000);
  EXPECT_EQ(got, kTotal);
  EXPECT_TRUE(exited);
}

TEST(AgentOutsideAContainerTest, RefusesToRunUnlessPid1) {
  // Its kill(-1) would reach every process of its user anywhere else.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0);
    ::dup2(devnull, 2);
    ::execl(CI_AGENT_BINARY, CI_AGENT_BINARY, nullptr);
    ::_exit(127);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

}  // namespace
}  // namespace ci::agent
