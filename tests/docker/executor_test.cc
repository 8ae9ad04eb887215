// The Docker backend against a real dockerd and the executor image
// (packaging/executor-image/build.sh). Skips when no dockerd answers or the image is missing,
// so a machine without Docker still passes; scripts/test.sh starts both before the suites.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "common/enforcement_spec.h"
#include "core/json.h"
#include "core/policies.h"
#include "daemon/service/python_program.h"
#include "docker/engine_client.h"
#include "docker/reaper.h"
#include "docker_fixture.h"

namespace ci::docker {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class DockerTest : public DockerFixture {
 protected:
  static SandboxSpec Spec() {
    SandboxSpec spec;
    spec.env = DefaultSandboxEnv();
    return spec;
  }

  struct Execution {
    Result<RunOutcome> outcome = Status::Error("not run");
    std::string out, err;
    Result<Collection> collection = Status::Error("not collected");
    ResourceReport report;
  };

  Execution Execute(std::vector<std::string> argv, std::chrono::milliseconds timeout = 10s,
                    std::optional<std::string> stdin_data = std::nullopt,
                    std::vector<StagedFile> files = {}, const SandboxSpec& spec = Spec(),
                    std::string collect_dir = {}) {
    Execution e;
    auto sandbox = Await(executor_->Prepare(spec));
    EXPECT_TRUE(sandbox.ok()) << sandbox.status().message();
    if (!sandbox.ok()) return e;
    RunPayload p;
    p.argv = std::move(argv);
    p.timeout = timeout;
    p.stdin_data = std::move(stdin_data);
    p.files = std::move(files);
    p.client = spec.client;  // as ExecutionService does: the client asks for both
    e.outcome = Await((*sandbox)->Run(std::move(p), [&](StreamKind k, std::string_view d) {
      (k == StreamKind::kStdout ? e.out : e.err).append(d);
    }));
    if (!collect_dir.empty()) {
      CollectLimits limits;
      limits.dest_dir = collect_dir;
      e.collection = Await((*sandbox)->Collect(limits));
    }
    e.report = Await((*sandbox)->Destroy());
    return e;
  }

  // Workspace path -> bytes of a collection's files.
  static std::map<std::string, std::string> Contents(const Collection& collection) {
    std::map<std::string, std::string> got;
    for (const auto& f : collection.files) {
      std::ifstream file(f.host_path);
      std::stringstream ss;
      ss << file.rdbuf();
      got[f.workspace_path] = ss.str();
    }
    return got;
  }

  std::string Sh(const std::string& cmd) {
    std::string out;
    FILE* f = ::popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    ::pclose(f);
    return out;
  }
};

TEST_F(DockerTest, HelloWorld) {
  auto e = Execute({"python3", "-c", "import sys; print('hello'); print('err', file=sys.stderr)"});
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_EQ(e.out, "hello\n");
  EXPECT_EQ(e.err, "err\n");
  EXPECT_EQ(e.outcome->exit_code, 0);
  EXPECT_FALSE(e.outcome->timed_out);
}

TEST_F(DockerTest, ExitCodeAndStdin) {
  auto e = Execute({"python3", "-c", "import sys; print(sys.stdin.read().upper()); sys.exit(3)"},
                   10s, std::string("abc\n"));
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_EQ(e.out, "ABC\n\n");
  EXPECT_EQ(e.outcome->exit_code, 3);
  // No stdin: EOF at once, never a hang.
  e = Execute({"python3", "-c", "import sys; print(len(sys.stdin.read()))"});
  ASSERT_TRUE(e.outcome.ok());
  EXPECT_EQ(e.out, "0\n");
}

TEST_F(DockerTest, TimeoutKillsTheWholeTreeAndKeepsTheWorkspace) {
  char dir[] = "/tmp/docker-collect-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  auto start = std::chrono::steady_clock::now();
  auto e = Execute({"bash", "-c",
                    "echo started; (setsid sleep 100 &); echo kept > /workspace/k.txt; "
                    "sleep 100"},
                   1000ms, std::nullopt, {}, Spec(), dir);
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_TRUE(e.outcome->timed_out);
  EXPECT_FALSE(e.outcome->exit_code.has_value());
  EXPECT_EQ(e.out, "started\n");
  EXPECT_LT(took, 8s);
  ASSERT_TRUE(e.collection.ok()) << e.collection.status().message();
  ASSERT_EQ(e.collection->files.size(), 1u);
  EXPECT_EQ(e.collection->files[0].workspace_path, "k.txt");
  std::system(("rm -rf " + std::string(dir)).c_str());
}

TEST_F(DockerTest, StagesAndCollectsFiles) {
  char dir[] = "/tmp/docker-collect-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string in = std::string(dir) + "/input";
  std::ofstream(in) << "1,2\n3,4\n";
  auto e = Execute({"python3", "-c",
                    "import os\n"
                    "rows = open('data/in.csv').read().split()\n"
                    "os.makedirs('out/deep', exist_ok=True)\n"
                    "open('out/deep/sum.txt','w').write(str(len(rows)))\n"
                    "open('.hidden','w').write('h')\n"
                    "os.symlink('/etc/passwd', 'link')\n"},
                   10s, std::nullopt, {{"data/in.csv", in}}, Spec(), dir);
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_EQ(e.outcome->exit_code, 0) << e.err;
  ASSERT_TRUE(e.collection.ok()) << e.collection.status().message();
  std::map<std::string, std::string> got = Contents(*e.collection);
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(got["out/deep/sum.txt"], "2");
  EXPECT_EQ(got[".hidden"], "h");
  EXPECT_EQ(got["data/in.csv"], "1,2\n3,4\n");
  std::system(("rm -rf " + std::string(dir)).c_str());
}

// Small top-level text files ride in the program's exec argv (nothing in any visible command
// line; stdin untouched); a file argv cannot carry (NUL, invalid UTF-8) sends all by tar.
TEST_F(DockerTest, SmallFilesInlineOthersByTar) {
  char dir[] = "/tmp/docker-inline-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string text = std::string(dir) + "/text", quirky = std::string(dir) + "/quirky",
              binary = std::string(dir) + "/binary";
  std::ofstream(text) << "x = 'é'\n";
  std::ofstream(quirky) << "-n $HOME `id` \\ \"'\n";
  std::ofstream(binary) << std::string("\xff\x00\x01", 3);
  auto e = Execute({"bash", "-c", "cat m.py -- -n; cat; grep -l 'i[d]`' /proc/[0-9]*/cmdline; ls"},
                   10s, std::string("in\n"), {{"m.py", text}, {"-n", quirky}});
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_EQ(e.out, "x = 'é'\n-n $HOME `id` \\ \"'\nin\n-n\nm.py\n") << e.err;
  EXPECT_EQ(e.outcome->exit_code, 0) << e.err;
  e = Execute({"od", "-An", "-tx1", "b.bin", "m.py"}, 10s, std::nullopt,
              {{"b.bin", binary}, {"m.py", text}});
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_EQ(e.out, " ff 00 01 78 20 3d 20 27 c3 a9 27 0a\n") << e.err;
  std::system(("rm -rf " + std::string(dir)).c_str());
}

TEST_F(DockerTest, StreamsChunkByChunk) {
  std::vector<std::chrono::steady_clock::time_point> arrivals;
  auto sandbox = Await(executor_->Prepare(Spec()));
  ASSERT_TRUE(sandbox.ok());
  RunPayload p;
  p.argv = {"python3", "-c",
            "import time\nfor i in range(3):\n print(i, flush=True)\n time.sleep(0.3)"};
  auto r = Await((*sandbox)->Run(std::move(p), [&](StreamKind, std::string_view) {
    arrivals.push_back(std::chrono::steady_clock::now());
  }));
  Await((*sandbox)->Destroy());
  ASSERT_TRUE(r.ok());
  ASSERT_GE(arrivals.size(), 3u);
  EXPECT_GT(arrivals.back() - arrivals.front(), 400ms);
}

TEST_F(DockerTest, HardeningProbe) {
  SandboxSpec spec = Spec();
  spec.security.seccomp_profile_json =
      R"({"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdirat","mkdir"],"action":"SCMP_ACT_ERRNO"}]})";
  auto e = Execute({"bash", "-c",
                    "grep -E '^(Seccomp|CapEff|NoNewPrivs):' /proc/self/status; id -u; "
                    "touch /usr/x 2>/dev/null && echo rootfs-writable || echo rootfs-ro; "
                    "ls /sys/class/net; mkdir /tmp/d 2>/dev/null && echo mkdir-ok || echo "
                    "mkdir-denied"},
                   10s, std::nullopt, {}, spec);
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_THAT(e.out, HasSubstr("Seccomp:\t2"));
  EXPECT_THAT(e.out, HasSubstr("CapEff:\t0000000000000000"));
  EXPECT_THAT(e.out, HasSubstr("NoNewPrivs:\t1"));
  EXPECT_THAT(e.out, HasSubstr("65532\n"));
  EXPECT_THAT(e.out, HasSubstr("rootfs-ro"));
  EXPECT_THAT(e.out, HasSubstr("lo\nmkdir-denied"));  // loopback only
}

// The report against what is really in force: dockerd's inspect of the container the executor
// created for the spec (HostConfig), and a probe inside it. Every reported measure is checked; a
// kind without a check here fails. Before the CPU cap was translated, the container's
// cpu.cfs_quota_us was -1 although /health listed the cap.
TEST_F(DockerTest, EnforcementReportIsWhatIsInForce) {
  SandboxSpec spec = testing_support::WithDistinctLimits(Spec());
  const Enforcement report = executor_->enforcement(spec);
  SCOPED_TRACE("reported: " + testing_support::ReportedNames(report));

  auto sandbox = Await(executor_->Prepare(spec));
  ASSERT_TRUE(sandbox.ok()) << sandbox.status().message();
  // The one live container of this process: inspect it.
  rapidjson::Document list, inspect;
  std::string why;
  ASSERT_TRUE(ParseJson(OurContainers("ci-exec-", true), list, why)) << why;
  ASSERT_TRUE(list.IsArray() && list.Size() == 1u);
  auto client = Client();
  std::string m = "GET", path = "/containers/" + std::string(list[0]["Id"].GetString()) + "/json";
  auto r = Await(client->Request(m, path));
  ASSERT_TRUE(r.ok() && r->ok());
  ASSERT_TRUE(ParseJson(r->body, inspect, why)) << why;
  const auto& host = inspect["HostConfig"];
  auto has_opt = [&](const std::string& prefix) {
    for (const auto& o : host["SecurityOpt"].GetArray()) {
      if (std::string(o.GetString()).rfind(prefix, 0) == 0) return true;
    }
    return false;
  };

  std::string out;
  RunPayload p;
  p.argv = {"bash", "-c", testing_support::kContainerProbeScript};
  auto outcome = Await((*sandbox)->Run(std::move(p), [&](StreamKind k, std::string_view d) {
    if (k == StreamKind::kStdout) out.append(d);
  }));
  Await((*sandbox)->Destroy());
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  SCOPED_TRACE("probe: " + out);
  std::map<std::string, std::string> in = testing_support::ParseProbe(out);
  auto host_ns = [](const std::string& n) {
    char buf[64] = {};
    ssize_t len = ::readlink(("/proc/self/ns/" + n).c_str(), buf, sizeof buf - 1);
    return std::string(buf, len > 0 ? static_cast<size_t>(len) : 0);
  };

  std::set<MeasureKind> checked;
  for (const Measure& me : report.enforced) {
    SCOPED_TRACE(MeasureName(me));
    checked.insert(me.kind);
    switch (me.kind) {
      case MeasureKind::kPidNamespace:
        EXPECT_EQ(std::string(host["PidMode"].GetString()), "");
        EXPECT_NE(in["ns_pid"], host_ns("pid"));
        break;
      case MeasureKind::kMountNamespace:
        EXPECT_NE(in["ns_mnt"], host_ns("mnt"));
        break;
      case MeasureKind::kNetworkNamespace:
        EXPECT_EQ(std::string(host["NetworkMode"].GetString()), "none");
        EXPECT_NE(in["ns_net"], host_ns("net"));
        EXPECT_EQ(in["ifaces"], "lo ");
        break;
      case MeasureKind::kReadOnlyRoot:
        EXPECT_TRUE(host["ReadonlyRootfs"].GetBool());
        EXPECT_EQ(in["usr"], "read-only");
        break;
      case MeasureKind::kNoCapabilities:
        EXPECT_EQ(std::string(host["CapDrop"][0].GetString()), "ALL");
        for (const char* set : {"CapEff", "CapPrm", "CapBnd"}) {
          EXPECT_EQ(in[set], "0000000000000000") << set;
        }
        break;
      case MeasureKind::kNoNewPrivs:
        EXPECT_TRUE(has_opt("no-new-privileges"));
        EXPECT_EQ(in["NoNewPrivs"], "1");
        break;
      case MeasureKind::kSeccomp:
        EXPECT_TRUE(has_opt("seccomp="));
        EXPECT_EQ(in["Seccomp"], "2");
        EXPECT_EQ(me.detail, "default profile");
        break;
      case MeasureKind::kMemoryLimit:
        EXPECT_EQ(me.amount, 200ull << 20);
        EXPECT_EQ(host["Memory"].GetInt64(), 200ll << 20);
        EXPECT_EQ(host["MemorySwap"].GetInt64(), 200ll << 20);
        EXPECT_EQ(in["mem"], std::to_string(200ull << 20));
        break;
      case MeasureKind::kPidsLimit:
        EXPECT_EQ(me.amount, 48u);
        EXPECT_EQ(host["PidsLimit"].GetInt64(), 48);
        EXPECT_EQ(in["pids"], "48");
        break;
      case MeasureKind::kCpuCap:
        EXPECT_EQ(me.amount, 50u);
        EXPECT_EQ(host["CpuQuota"].GetInt64(), 50000);
        EXPECT_EQ(host["CpuPeriod"].GetInt64(), 100000);
        EXPECT_EQ(in["cpu"], "50000 100000");
        break;
      case MeasureKind::kCpuTime:
        EXPECT_EQ(me.amount, 7u);
        EXPECT_EQ(in["ulimit_t"], "7");
        break;
      case MeasureKind::kOpenFilesLimit:
        EXPECT_EQ(in["limit_nofile"], std::to_string(me.amount));
        break;
      case MeasureKind::kQueuedSignalsLimit:
        EXPECT_EQ(in["limit_sigpending"], std::to_string(me.amount));
        break;
      case MeasureKind::kMessageQueueLimit:
        EXPECT_EQ(in["limit_msgqueue"], std::to_string(me.amount));
        break;
      case MeasureKind::kLockedMemoryLimit:
        EXPECT_EQ(in["limit_memlock"], std::to_string(me.amount));
        break;
      case MeasureKind::kNoTerminal:
        EXPECT_EQ(in["tty"], "none");
        EXPECT_EQ(in["tty_nr"], "0");
        break;
      default:
        ADD_FAILURE() << "no check for this measure kind: add one here";
    }
  }
  for (MeasureKind k :
       {MeasureKind::kPidNamespace, MeasureKind::kMountNamespace, MeasureKind::kNetworkNamespace,
        MeasureKind::kReadOnlyRoot, MeasureKind::kNoCapabilities, MeasureKind::kNoNewPrivs,
        MeasureKind::kSeccomp, MeasureKind::kMemoryLimit, MeasureKind::kPidsLimit,
        MeasureKind::kCpuCap, MeasureKind::kCpuTime, MeasureKind::kOpenFilesLimit,
        MeasureKind::kQueuedSignalsLimit, MeasureKind::kMessageQueueLimit,
        MeasureKind::kLockedMemoryLimit, MeasureKind::kNoTerminal}) {
    EXPECT_TRUE(checked.count(k)) << "not reported: " << MeasureName(Measure(k));
  }
}

// SECCOMP_LOG_DENIED: the profile's denials are let through (and logged), as on local; the
// report says so with a downgrade.
TEST_F(DockerTest, LogDeniedSeccompLetsDeniedCallsThrough) {
  SandboxSpec spec = Spec();
  spec.security.seccomp_profile_json =
      R"({"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdirat","mkdir"],"action":"SCMP_ACT_ERRNO"}]})";
  spec.security.seccomp_profile_name = "default";
  spec.security.seccomp_log_denied = true;
  const Enforcement report = executor_->enforcement(spec);
  ASSERT_EQ(report.downgrades.size(), 2u);  // and the shared host uid of every container
  EXPECT_EQ(report.downgrades[0].measure, "seccomp (default profile)");
  EXPECT_EQ(report.downgrades[1].measure, "own host uid/gid per sandbox");
  auto e = Execute({"bash", "-c", "mkdir /tmp/d && echo mkdir-ok"}, 10s, std::nullopt, {}, spec);
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_EQ(e.out, "mkdir-ok\n") << e.err;
}

TEST_F(DockerTest, MemoryLimitIsAnOomVerdict) {
  SandboxSpec spec = Spec();
  spec.limits.memory_bytes = 64ull << 20;
  auto e = Execute({"python3", "-c", "x = bytearray(200 << 20); print(len(x))"}, 20s, std::nullopt,
                   {}, spec);
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_TRUE(e.report.oom_killed) << e.out << e.err;
}

// Destroy removes the container in the background; Drain waits for it.
TEST_F(DockerTest, NoContainerLeftBehind) {
  auto e = Execute({"true"});
  ASSERT_TRUE(e.outcome.ok());
  auto drain = [this]() -> asio::awaitable<bool> {
    co_await executor_->Drain();
    co_return true;
  };
  Await(drain());
  EXPECT_EQ(OurContainers("ci-exec-", true), "");
}

// The fork bomb's processes fill the pids limit; the verdict comes from the cgroup's pids.events
// (read from the host with a local dockerd, or by an exec that gets room from a raised limit),
// and the leftovers are gone after Run so Collect's tar still starts.
TEST_F(DockerTest, ForkBombIsAPidsVerdictAndCollectStillWorks) {
  SandboxSpec spec = Spec();
  spec.limits.pids = 32;
  char dir[] = "/tmp/docker-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  auto t0 = std::chrono::steady_clock::now();
  auto e = Execute(
      {"python3", "-c", "import os\nopen('marker', 'w').write('x')\nwhile True:\n    os.fork()"},
      3s, std::nullopt, {}, spec, dir);
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_TRUE(e.report.pids_limit_hit);
  ASSERT_TRUE(e.collection.ok()) << e.collection.status().message();
  ASSERT_EQ(e.collection->files.size(), 1u);
  EXPECT_EQ(e.collection->files[0].workspace_path, "marker");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  Sh(std::string("rm -rf ") + dir);
}

// A remote Engine's way: the counters and the leftovers' kill through an exec, which gets room
// from a raised pids limit when the bomb's processes fill it.
TEST_F(DockerTest, ForkBombThroughTheExecProbe) {
  opts_.host_cgroups = false;
  executor_ = MakeDockerExecutor(io_.get_executor(), opts_);
  SandboxSpec spec = Spec();
  spec.limits.pids = 32;
  // The program leaves a sleeping bomb behind that keeps the limit full: the probe can only
  // start once the limit is raised.
  auto e =
      Execute({"bash", "-c", "(f() { f & f & sleep 30; }; f) >/dev/null 2>&1 & sleep 1.5; exit 0"},
              10s, std::nullopt, {}, spec);
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_TRUE(e.report.pids_limit_hit);
  auto r = Execute({"python3", "-c", "x = bytearray(60 << 20)"});
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.status().message();
  EXPECT_GE(r.report.memory_peak_bytes, 60ull << 20);
}

TEST_F(DockerTest, ReportsCpuTimeAndMemoryPeak) {
  auto e = Execute({"python3", "-c",
                    "import time\nx = bytearray(80 << 20)\nt = time.process_time()\n"
                    "while time.process_time() - t < 0.3: pass\n"});
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_EQ(e.outcome->exit_code, 0) << e.err;
  EXPECT_GE(e.outcome->cpu_ms, 250u);
  EXPECT_GE(e.outcome->max_rss_kb, 80u << 10);
  EXPECT_GE(e.report.memory_peak_bytes, 80ull << 20);
  EXPECT_FALSE(e.report.oom_killed);
  EXPECT_FALSE(e.report.pids_limit_hit);
}

// Recycled execution containers (src/agent/recycle.h): what one execution leaves anywhere it can
// write, or runs, is gone for the next one in the same container, and the next one's counters
// are its own.
class DockerRecycleTest : public DockerTest {
 protected:
  void SetUp() override {
    DockerTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (!opts_.agent) GTEST_SKIP() << "containers are driven by execs: none is recycled";
  }
  // The container an execution ran in, as its cgroup names it.
  static std::string ContainerOf(const std::string& out) {
    size_t at = out.find("cgroup:");
    return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
  }
  // kWhere's output, run in `sandbox` (a failure is the test's).
  std::string Where(Sandbox& sandbox) {
    std::string out;
    RunPayload p;
    p.argv = {"bash", "-c", kWhere};
    auto r =
        Await(sandbox.Run(std::move(p), [&](StreamKind, std::string_view d) { out.append(d); }));
    EXPECT_TRUE(r.ok()) << r.status().message();
    return out;
  }
  // Lets the previous execution's recycle (in the background after Destroy) finish.
  void LetRecycle() { io_.run_for(500ms); }
  static constexpr const char* kWhere =
      "echo cgroup:$(grep -o '[0-9a-f]\\{64\\}' /proc/self/cgroup | head -n1); ";
};

TEST_F(DockerRecycleTest, NothingOfAnExecutionReachesTheNext) {
  auto a = Execute(
      {"bash", "-c",
       std::string(kWhere) +
           "echo w > /workspace/left; mkdir -p /tmp/d/e; echo t > /tmp/d/e/f; chmod 0 /tmp/d; "
           "echo s > /dev/shm/left; : > /dev/mqueue/left 2>/dev/null; chmod 700 /workspace; "
           "ln -s /etc/passwd /workspace/link; ipcmk -M 4096 >/dev/null; ipcmk -Q >/dev/null; "
           "ipcmk -S 2 >/dev/null; setsid sleep 300 </dev/null >/dev/null 2>&1 & "
           "(trap '' TERM HUP; exec -a hidden sleep 301) </dev/null >/dev/null 2>&1 & "
           "echo left"});
  ASSERT_TRUE(a.outcome.ok()) << a.outcome.status().message();
  ASSERT_EQ(a.outcome->exit_code, 0) << a.err;
  LetRecycle();
  auto b = Execute(
      {"bash", "-c",
       std::string(kWhere) +
           "ls -A /workspace /tmp /dev/shm /dev/mqueue; stat -c 'mode %a' /workspace; "
           "for p in /proc/[0-9]*; do [ $p = /proc/1 ] || [ $p = /proc/$$ ] || "
           "[ $p = /proc/self ] || [ $p = /proc/thread-self ] || echo \"proc $(cat $p/comm)\"; "
           "done 2>/dev/null | grep 'proc sleep'; "
           "tail -q -n +2 /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem | wc -l"});
  ASSERT_TRUE(b.outcome.ok()) << b.outcome.status().message();
  ASSERT_FALSE(ContainerOf(a.out).empty()) << a.out;
  EXPECT_EQ(ContainerOf(b.out), ContainerOf(a.out)) << "the second execution was not recycled";
  EXPECT_EQ(b.out.substr(b.out.find('\n') + 1),
            "/dev/mqueue:\n\n/dev/shm:\n\n/tmp:\n\n/workspace:\nmode 755\n0\n")
      << b.err;
}

TEST_F(DockerRecycleTest, EachExecutionHasCountersOfItsOwn) {
  SandboxSpec spec = Spec();
  spec.limits.memory_bytes = 256ull << 20;
  auto a =
      Execute({"bash", "-c",
               std::string(kWhere) +
                   "python3 -c 'import time\nx = bytearray(150 << 20)\nt = time.process_time()"
                   "\nwhile time.process_time() - t < 0.5: pass'; "
                   "python3 -c 'x = bytearray(400 << 20)'; :(){ :|:& };: 2>/dev/null; sleep 1"},
              20s, std::nullopt, {}, spec);
  ASSERT_TRUE(a.outcome.ok()) << a.outcome.status().message();
  EXPECT_TRUE(a.report.oom_killed);
  EXPECT_GE(a.report.memory_peak_bytes, 150ull << 20);
  EXPECT_GE(a.report.cpu_ms, 400u);
  LetRecycle();
  auto b = Execute({"bash", "-c", std::string(kWhere)}, 10s, std::nullopt, {}, spec);
  ASSERT_TRUE(b.outcome.ok()) << b.outcome.status().message();
  ASSERT_EQ(ContainerOf(b.out), ContainerOf(a.out)) << "the second execution was not recycled";
  EXPECT_FALSE(b.report.oom_killed);
  EXPECT_FALSE(b.report.pids_limit_hit);
  EXPECT_LT(b.report.memory_peak_bytes, 100ull << 20);
  EXPECT_LT(b.report.cpu_ms, 300u);
}

// Issue #30 item 1: a container goes back to the client whose program it ran, and only to it; an
// execution for another client gets a container of its own.
TEST_F(DockerRecycleTest, AContainerIsRecycledForItsClientOnly) {
  SandboxSpec alice = Spec();
  alice.client = "alice";
  SandboxSpec bob = Spec();
  bob.client = "bob";
  auto a = Execute({"bash", "-c", kWhere}, 10s, std::nullopt, {}, alice);
  ASSERT_TRUE(a.outcome.ok()) << a.outcome.status().message();
  ASSERT_FALSE(ContainerOf(a.out).empty()) << a.out;
  LetRecycle();
  auto b = Execute({"bash", "-c", kWhere}, 10s, std::nullopt, {}, bob);
  ASSERT_TRUE(b.outcome.ok()) << b.outcome.status().message();
  EXPECT_NE(ContainerOf(b.out), ContainerOf(a.out)) << "bob ran in alice's container";
  LetRecycle();
  auto a2 = Execute({"bash", "-c", kWhere}, 10s, std::nullopt, {}, alice);
  ASSERT_TRUE(a2.outcome.ok()) << a2.outcome.status().message();
  EXPECT_EQ(ContainerOf(a2.out), ContainerOf(a.out)) << "alice's container was not recycled";
  auto b2 = Execute({"bash", "-c", kWhere}, 10s, std::nullopt, {}, bob);
  ASSERT_TRUE(b2.outcome.ok()) << b2.outcome.status().message();
  EXPECT_EQ(ContainerOf(b2.out), ContainerOf(b.out)) << "bob's container was not recycled";
}

// What the agent cannot put back for certain (here a tree too deep to walk) ends the container.
TEST_F(DockerRecycleTest, AContainerThatCannotBeWipedIsRemoved) {
  auto a = Execute(
      {"bash", "-c", std::string(kWhere) + "cd /tmp; for i in $(seq 300); do mkdir d; cd d; done"});
  ASSERT_TRUE(a.outcome.ok()) << a.outcome.status().message();
  LetRecycle();
  auto b = Execute({"bash", "-c", std::string(kWhere) + "ls -A /tmp"});
  ASSERT_TRUE(b.outcome.ok()) << b.outcome.status().message();
  EXPECT_NE(ContainerOf(b.out), ContainerOf(a.out));
  EXPECT_EQ(b.out.substr(b.out.find('\n') + 1), "");
}

TEST_F(DockerRecycleTest, AKilledSandboxIsNotRecycled) {
  auto sandbox = Await(executor_->Prepare(Spec()));
  ASSERT_TRUE(sandbox.ok()) << sandbox.status().message();
  const std::string first = Where(**sandbox);
  ASSERT_FALSE(HasFailure());
  (*sandbox)->Kill();
  Await((*sandbox)->Destroy());
  LetRecycle();
  auto b = Execute({"bash", "-c", kWhere});
  ASSERT_TRUE(b.outcome.ok()) << b.outcome.status().message();
  EXPECT_NE(ContainerOf(b.out), ContainerOf(first));
}

// The daemon counts the container's processes in its cgroup after the agent's recycle: one the
// agent cannot see (here a host process the test moves into the container's cgroup, outside its
// pid namespace) ends the container.
TEST_F(DockerRecycleTest, AProcessTheAgentCannotSeeEndsTheContainer) {
  auto sandbox = Await(executor_->Prepare(Spec()));
  ASSERT_TRUE(sandbox.ok()) << sandbox.status().message();
  const std::string first = Where(**sandbox);
  const std::string id = ContainerOf(first).substr(std::string("cgroup:").size());
  ASSERT_EQ(id.size(), 64u) << first;
  std::string procs;
  for (const char* dir :
       {"/sys/fs/cgroup/pids/docker/", "/sys/fs/cgroup/pids/system.slice/docker-"}) {
    const std::string path = dir + id + (std::string(dir).ends_with("-") ? ".scope" : "");
    if (::access((path + "/cgroup.procs").c_str(), W_OK) == 0) procs = path + "/cgroup.procs";
  }
  if (procs.empty()) GTEST_SKIP() << "no cgroup v1 pids directory of the container here";
  pid_t hidden = ::fork();
  ASSERT_GE(hidden, 0);
  if (hidden == 0) {
    ::execlp("sleep", "sleep", "60", nullptr);
    ::_exit(127);
  }
  { std::ofstream(procs) << hidden << "\n"; }
  Await((*sandbox)->Destroy());
  LetRecycle();
  auto b = Execute({"bash", "-c", kWhere});
  ::kill(hidden, SIGKILL);
  ::waitpid(hidden, nullptr, 0);
  ASSERT_TRUE(b.outcome.ok()) << b.outcome.status().message();
  EXPECT_NE(ContainerOf(b.out), ContainerOf(first)) << "recycled with a process left in it";
}

// Python programs of the pool's kind: forked from the container's fork server
// (src/agent/python_fork_server.h), which outlives recycles while no program changed it.
class DockerForkServerTest : public DockerRecycleTest {
 protected:
  void SetUp() override {
    DockerRecycleTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (!opts_.fork_server) GTEST_SKIP() << "PYTHON_EXECUTOR_DOCKER_FORK_SERVER is off";
  }
  static SandboxSpec PythonSpec() {
    SandboxSpec spec = Spec();
    spec.security.seccomp_profile_json = std::string(*EmbeddedPolicy("seccomp-executor"));
    spec.prestart_argv = daemon::PythonPrestartArgv({});
    spec.zygote_argv = daemon::PythonZygoteArgv({"json"});
    return spec;
  }
  // `code` as the service runs it: /workspace/__main__.py, the driver's go line.
  Execution Python(const std::string& code, const SandboxSpec& spec = PythonSpec()) {
    const std::string main =
        ::testing::TempDir() + "ci-fork-server-" + std::to_string(::getpid()) + "-main.py";
    std::ofstream(main) << code;
    std::vector<StagedFile> files = {{"__main__.py", main}};
    Execution e;
    auto sandbox = Await(executor_->Prepare(spec));
    EXPECT_TRUE(sandbox.ok()) << sandbox.status().message();
    if (!sandbox.ok()) return e;
    RunPayload p;
    p.argv = PythonSpec().prestart_argv;
    p.go = "script 10\n";
    p.files = std::move(files);
    p.timeout = 10s;
    e.outcome = Await((*sandbox)->Run(std::move(p), [&](StreamKind k, std::string_view d) {
      (k == StreamKind::kStdout ? e.out : e.err).append(d);
    }));
    e.report = Await((*sandbox)->Destroy());
    LetRecycle();
    return e;
  }
  // The fork server's pid as the programs see it, and whether this program is its fork.
  static constexpr const char* kZygote =
      "import os, sys\n"
      "z = [p for p in os.listdir('/proc') if p.isdigit() and p not in ('1', str(os.getpid()))\n"
      "     and (lambda c: c.startswith(b'python3\\0-c\\0') and b'def _ci_zygote():' in c)(\n"
      "         open(f'/proc/{p}/cmdline', 'rb').read())]\n"
      "print('zygote', z, 'forked', 'json' in sys.modules, os.getppid())\n";
};

TEST_F(DockerForkServerTest, ProgramsAreForkedAndTheServerOutlivesRecycles) {
  auto a = Python(kZygote + std::string("print(__name__, __file__)\nraise SystemExit(3)"));
  ASSERT_TRUE(a.outcome.ok()) << a.outcome.status().message();
  EXPECT_EQ(a.outcome->exit_code, 3) << a.err;
  ASSERT_NE(a.out.find("forked True 1\n__main__ /workspace/__main__.py\n"), std::string::npos)
      << a.out << a.err;
  auto b = Python(kZygote + std::string("x = 1 / 0"));
  ASSERT_TRUE(b.outcome.ok()) << b.outcome.status().message();
  EXPECT_EQ(b.outcome->exit_code, 1);
  EXPECT_EQ(b.out.substr(0, b.out.find(" forked")), a.out.substr(0, a.out.find(" forked")))
      << "the same fork server";
  EXPECT_NE(b.err.find("File \"/workspace/__main__.py\", line 6"), std::string::npos) << b.err;
  EXPECT_EQ(b.err.find("<string>"), std::string::npos) << "no frame of the server: " << b.err;
}

TEST_F(DockerForkServerTest, WithoutAProgramStartedAheadItIsForkedAtTheRun) {
  // A warm pool's miss prepares a sandbox with nothing started ahead (WarmPool::Prepare).
  SandboxSpec cold = PythonSpec();
  cold.prestart_argv.clear();
  auto a = Python(kZygote, cold);
  ASSERT_TRUE(a.outcome.ok()) << a.outcome.status().message();
  EXPECT_NE(a.out.find("forked True 1\n"), std::string::npos) << a.out << a.err;
  auto b = Python(kZygote, cold);
  ASSERT_TRUE(b.outcome.ok()) << b.outcome.status().message();
  EXPECT_EQ(b.out, a.out) << "the same fork server, kept";
}

TEST_F(DockerForkServerTest, AServerAProgramCouldHaveChangedIsReplaced) {
  // Another process's limits are out of reach (the seccomp profile: prlimit64 sets the caller's
  // own only), and the server's are checked anyway.
  auto refused =
      Python(kZygote + std::string("import resource\nz = int(z[0])\n"
                                   "try:\n"
                                   "    resource.prlimit(z, resource.RLIMIT_NOFILE, (16, 16))\n"
                                   "except PermissionError:\n"
                                   "    print('refused')\n"));
  ASSERT_TRUE(refused.outcome.ok()) << refused.outcome.status().message();
  EXPECT_NE(refused.out.find("refused\n"), std::string::npos) << refused.out << refused.err;
  // Each of these is in reach of a program of the server's user; the next program must not
  // inherit it: its niceness, scheduling or CPU set, or a stopped server.
  const char* changes[] = {
      "os.setpriority(os.PRIO_PROCESS, z, 19)",
      "os.sched_setscheduler(z, os.SCHED_IDLE, os.sched_param(0))",
      "os.kill(z, signal.SIGSTOP)",
  };
  for (const char* change : changes) {
    auto a = Python(kZygote + std::string("import resource, signal\nz = int(z[0])\n") + change);
    ASSERT_TRUE(a.outcome.ok()) << a.outcome.status().message();
    ASSERT_EQ(a.outcome->exit_code, 0) << change << ": " << a.err;
    auto b = Python(kZygote + std::string("import resource\n"
                                          "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0],"
                                          " os.getpriority(os.PRIO_PROCESS, 0),"
                                          " os.sched_getscheduler(0))"));
    ASSERT_TRUE(b.outcome.ok()) << b.outcome.status().message();
    EXPECT_NE(b.out.substr(0, b.out.find(" forked")), a.out.substr(0, a.out.find(" forked")))
        << change << ": the server was kept";
    EXPECT_NE(b.out.find("forked True 1\n"), std::string::npos) << change << ": " << b.out << b.err;
    EXPECT_NE(b.out.find("\n1024 0 0\n"), std::string::npos) << change << ": " << b.out;
  }
}

// A crash's leftovers: an executor container whose owner daemon is gone, and an expired one,
// are removed by the first check of a new executor; a live daemon's container is kept.
TEST_F(DockerTest, ReaperRemovesLeftoversAtStartup) {
  EngineClient c(io_.get_executor(), opts_.endpoint, 10s);
  ASSERT_TRUE(Await(c.Negotiate()).ok());
  const std::string here = OwnerPrefixHere();  // this host and pid namespace
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  struct stat ns = {};
  ASSERT_EQ(::stat("/proc/self/ns/pid", &ns), 0);
  EXPECT_EQ(OwnerHere(),
            std::string(host) + "@" + std::to_string(ns.st_ino) + "/" + std::to_string(::getpid()));
  auto create = [&](const std::string& name, const std::string& labels) {
    std::string m = "POST", p = "/containers/create?name=" + name,
                body = "{\"Image\":\"" + opts_.image +
                       "\",\"Cmd\":[\"sleep\",\"infinity\"],\"Labels\":{\"app\":"
                       "\"code-interpreter\"," +
                       labels + "}}";
    auto r = Await(c.Request(m, p, body));
    EXPECT_TRUE(r.ok() && r->status == 201) << (r.ok() ? r->body : r.status().message());
  };
  std::string suffix = std::to_string(::getpid());
  // pid 0x7ffffff0 is above any pid_max: a daemon that is gone.
  create("ci-reap-dead-" + suffix,
         std::string("\"component\":\"executor\",") + "\"code-interpreter.owner\":\"" + here +
             "2147483632\",\"code-interpreter.expires-at\":\"" + "99999999999\"");
  // The same hostname and a pid that is not ours, in another pid namespace (a daemon in a
  // container on the host's network): not ours to judge, whatever kill() says here.
  create("ci-reap-otherns-" + suffix,
         std::string("\"component\":\"executor\",") + "\"code-interpreter.owner\":\"" + host +
             "@1/2147483632\",\"code-interpreter.expires-at\":\"" + "99999999999\"");
  create("ci-reap-expired-" + suffix,
         "\"component\":\"session\",\"code-interpreter.expires-at\":\"1000\"");
  create("ci-reap-alive-" + suffix, std::string("\"component\":\"executor\",") +
                                        "\"code-interpreter.owner\":\"" + here + "1\"," +
                                        "\"code-interpreter.expires-at\":\"99999999999\"");
  auto fresh = MakeDockerExecutor(io_.get_executor(), opts_);
  ASSERT_TRUE(Await(fresh->Check()).ok());
  RunUntil([&] {  // the sweep runs detached from the check
    return OurContainers("ci-reap-dead-").empty() && OurContainers("ci-reap-expired-").empty();
  });
  EXPECT_EQ(OurContainers("ci-reap-dead-"), "");
  EXPECT_EQ(OurContainers("ci-reap-expired-"), "");
  EXPECT_NE(OurContainers("ci-reap-alive-"), "");
  EXPECT_NE(OurContainers("ci-reap-otherns-"), "");
  for (const char* left : {"ci-reap-alive-", "ci-reap-otherns-"}) {
    std::string m = "DELETE", p = "/containers/" + std::string(left) + suffix + "?force=1";
    Await(c.Request(m, p));
  }
}

TEST_F(DockerTest, MissingImageIsNamedByCheck) {
  DockerExecutorOptions o = opts_;
  o.image = "code-interpreter-no-such-image:zzz";
  auto ex = MakeDockerExecutor(io_.get_executor(), o);
  Status s = Await(ex->Check());
  EXPECT_THAT(s.message(), HasSubstr("Executor image code-interpreter-no-such-image:zzz not "
                                     "available locally"));
}

// tests/docker/fake_registry.py on a free port of 127.0.0.1 (dockerd pulls from it over plain
// HTTP: loopback registries are insecure by default).
class FakeRegistry {
 public:
  FakeRegistry() {
    int fds[2];
    if (::pipe(fds) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    std::vector<std::string> args = {"python3", CI_FAKE_REGISTRY, "--print-digest"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid_, "python3", &fa, nullptr, argv.data(), environ) != 0) pid_ = 0;
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    FILE* out = ::fdopen(fds[0], "r");
    char line[256];
    while (out != nullptr && std::fgets(line, sizeof line, out) != nullptr) {
      std::string l(line);
      if (l.rfind("listening on ", 0) == 0) port_ = std::stoi(l.substr(13));
      if (l.rfind("digest ", 0) == 0) {
        digest_ = l.substr(7, l.find_last_not_of("\n") - 6);
        break;
      }
    }
    if (out != nullptr) std::fclose(out);
  }
  ~FakeRegistry() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool ok() const { return port_ > 0 && !digest_.empty(); }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& digest() const { return digest_; }

 private:
  pid_t pid_ = 0;
  int port_ = 0;
  std::string digest_;
};

TEST_F(DockerTest, PullsAMissingImageFromARegistryByTagAndByDigest) {
  FakeRegistry registry;
  ASSERT_TRUE(registry.ok()) << "tests/docker/fake_registry.py did not start";
  EngineClient c(io_.get_executor(), opts_.endpoint, 10s);
  ASSERT_TRUE(Await(c.Negotiate()).ok());
  std::string tagged = registry.host() + "/tiny:v1";
  std::string digested = registry.host() + "/tiny@" + registry.digest();
  auto remove = [&] {
    std::string m = "DELETE";
    for (const auto& ref : {tagged, digested}) {
      std::string p = "/images/" + ref + "?force=1";
      Await(c.Request(m, p));
    }
  };
  remove();
  for (const auto& ref : {tagged, digested}) {
    DockerExecutorOptions o = opts_;
    o.image = NormalizeImageRef(ref);
    auto ex = MakeDockerExecutor(io_.get_executor(), o);
    Status s = Await(ex->Check());
    EXPECT_TRUE(s.ok()) << ref << ": " << s.message();
    std::string m = "GET", p = "/images/" + ref + "/json";
    auto r = Await(c.Request(m, p));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << ref << " is not there after the pull: " << r->body;
    remove();
  }
}

TEST_F(DockerTest, PullErrorIsNamedByCheck) {
  FakeRegistry registry;
  ASSERT_TRUE(registry.ok()) << "tests/docker/fake_registry.py did not start";
  for (const auto& ref : {registry.host() + "/nosuch:v1", registry.host() + "/tiny:nosuchtag"}) {
    DockerExecutorOptions o = opts_;
    o.image = ref;
    auto ex = MakeDockerExecutor(io_.get_executor(), o);
    Status s = Await(ex->Check());
    EXPECT_THAT(s.message(),
                HasSubstr("Executor image " + ref + " not available locally: the pull failed: "));
    EXPECT_THAT(s.message(), HasSubstr("packaging/executor-image/build.sh"));
  }
}

TEST_F(DockerTest, NegotiatesApiVersion) {
  EngineClient c(io_.get_executor(), opts_.endpoint, 5s);
  ASSERT_TRUE(Await(c.Negotiate()).ok());
  EXPECT_GE(ParseApiVersion(c.api_version()), kMinApiVersion);
  EXPECT_LE(ParseApiVersion(c.api_version()), kMaxApiVersion);
  std::string m = "GET", p = "/containers/no-such-container-x/json";
  auto r = Await(c.Request(m, p));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404);
  EXPECT_THAT(HttpError("inspect", *r).message(),
              HasSubstr("No such container: no-such-container-x (HTTP 404)"));
}

// tcp + TLS with a client certificate, against the dockerd's TLS listener that
// tests/docker/start-dockerd.sh sets up: the test PKI in $DOCKER_TLS_DIR
// (/tmp/code-interpreter-tls; client/ works, ca-only/ has no client certificate, wrong-ca/ an
// unrelated CA), the listener named in its `host` file. Over tcp the counters come from the
// in-container exec probe (no host cgroups).
class DockerTlsTest : public DockerTest {
 protected:
  using Env = std::map<std::string, std::string>;

  Result<DockerExecutorOptions> Options() override {
    const char* d = std::getenv("DOCKER_TLS_DIR");
    dir_ = d != nullptr && *d != '\0' ? d : "/tmp/code-interpreter-tls";
    std::ifstream f(dir_ + "/host");
    std::getline(f, host_);
    if (host_.empty()) {
      return Status::Error("no dockerd TLS listener (" + dir_ +
                           "/host is missing; tests/docker/start-dockerd.sh makes it)");
    }
    return OptionsFor({{"DOCKER_TLS_VERIFY", "1"}, {"DOCKER_CERT_PATH", dir_ + "/client"}});
  }

  // DOCKER_HOST is the TLS listener unless `env` says otherwise; other variables (the image)
  // come from the environment.
  Result<DockerExecutorOptions> OptionsFor(Env env) {
    env.emplace("DOCKER_HOST", host_);
    return DockerOptionsFromEnv([env](const char* n) -> const char* {
      if (auto it = env.find(n); it != env.end()) return it->second.c_str();
      std::string_view name(n);
      if (name.rfind("DOCKER_", 0) == 0) return nullptr;  // only this test's DOCKER_* values
      return std::getenv(n);
    });
  }

  // Negotiate's status for a client with these DOCKER_* values.
  Status NegotiateWith(Env env) {
    auto opts = OptionsFor(std::move(env));
    if (!opts.ok()) return opts.status();
    EngineClient c(io_.get_executor(), opts->endpoint, 10s);
    Status s = Await(c.Negotiate());
    spdlog::debug("negotiate: {}", s.ok() ? "ok" : s.message());  // DOCKER_TEST_DEBUG=1 shows it
    return s;
  }

  std::string dir_, host_;
};

TEST_F(DockerTlsTest, NegotiatesWithAClientCertificate) {
  ASSERT_EQ(opts_.endpoint.kind, Endpoint::Kind::kTcp);
  EXPECT_THAT(opts_.endpoint.Describe(), HasSubstr("(TLS, verified)"));
  EngineClient c(io_.get_executor(), opts_.endpoint, 5s);
  ASSERT_TRUE(Await(c.Negotiate()).ok());
  EXPECT_GE(ParseApiVersion(c.api_version()), kMinApiVersion);
  std::string m = "GET", p = "/containers/no-such-container-x/json";
  auto r = Await(c.Request(m, p));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 404);
  // By name: SNI and the certificate's DNS name (the listener is on 127.0.0.1).
  std::string by_name = "tcp://localhost:" + host_.substr(host_.rfind(':') + 1);
  Status s = NegotiateWith({{"DOCKER_HOST", by_name},
                            {"DOCKER_TLS_VERIFY", "1"},
                            {"DOCKER_CERT_PATH", dir_ + "/client"}});
  EXPECT_TRUE(s.ok()) << s.message();
}

// Prepare, staging (tar over a hijacked stream, half-closed), a program reading a large stdin
// to EOF, the exec probe's counters, Collect and Destroy: all over TLS.
TEST_F(DockerTlsTest, WholeExecutionWithStdinEof) {
  char dir[] = "/tmp/docker-tls-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string in = std::string(dir) + "/input";
  std::ofstream(in) << "staged over TLS\n";
  std::string input;
  for (int i = 0; i < 20000; ++i) input += "line " + std::to_string(i) + "\n";  // many records
  auto e = Execute({"python3", "-c",
                    "import sys, hashlib\n"
                    "data = sys.stdin.buffer.read()\n"
                    "print(len(data), hashlib.sha256(data).hexdigest()[:16])\n"
                    "open('out.txt', 'w').write(open('data/in.txt').read().upper())\n"
                    "x = bytearray(40 << 20)\n"},
                   20s, input, {{"data/in.txt", in}}, Spec(), dir);
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_EQ(e.outcome->exit_code, 0) << e.err;
  std::ofstream(std::string(dir) + "/stdin") << input;
  std::string sha = Sh("sha256sum " + std::string(dir) + "/stdin | cut -c1-16");
  EXPECT_EQ(e.out, std::to_string(input.size()) + " " + sha);
  ASSERT_TRUE(e.collection.ok()) << e.collection.status().message();
  std::map<std::string, std::string> got = Contents(*e.collection);
  EXPECT_EQ(got["out.txt"], "STAGED OVER TLS\n");
  EXPECT_GE(e.report.memory_peak_bytes, 40ull << 20);  // the exec probe, over TLS
  Sh("rm -rf " + std::string(dir));
}

TEST_F(DockerTlsTest, TimeoutOverTls) {
  auto start = std::chrono::steady_clock::now();
  auto e = Execute({"bash", "-c", "echo started; sleep 100"}, 1000ms);
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_TRUE(e.outcome->timed_out);
  EXPECT_EQ(e.out, "started\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 8s);
}

TEST_F(DockerTlsTest, MissingClientCertificateIsNamed) {
  // DOCKER_TLS_VERIFY needs the client certificate: an error before connecting.
  Status s = NegotiateWith({{"DOCKER_TLS_VERIFY", "1"}, {"DOCKER_CERT_PATH", dir_ + "/ca-only"}});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("docker at " + host_ + " (TLS, verified)"));
  EXPECT_THAT(s.message(),
              HasSubstr(dir_ + "/ca-only/cert.pem and " + dir_ + "/ca-only/key.pem are missing"));
  EXPECT_THAT(s.message(), HasSubstr("DOCKER_TLS_VERIFY is set"));
  // Without verification none is offered, and the daemon (--tlsverify) refuses the session.
  s = NegotiateWith({{"DOCKER_TLS", "1"}, {"DOCKER_CERT_PATH", dir_ + "/ca-only"}});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("docker at " + host_ + " (TLS, not verified)"));
  EXPECT_THAT(s.message(), HasSubstr("no client certificate was offered: " + dir_ +
                                     "/ca-only/cert.pem does not exist"));
}

TEST_F(DockerTlsTest, WrongCaIsAVerificationError) {
  Status s = NegotiateWith({{"DOCKER_TLS_VERIFY", "1"}, {"DOCKER_CERT_PATH", dir_ + "/wrong-ca"}});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("docker at " + host_ +
                                     " (TLS, verified): the daemon's "
                                     "certificate did not verify: "));
  EXPECT_THAT(s.message(), HasSubstr("(CA " + dir_ + "/wrong-ca/ca.pem, host 127.0.0.1)"));
  EXPECT_THAT(s.message(), HasSubstr("issuer certificate"));  // OpenSSL's reason
}

// DOCKER_TLS: TLS without verifying the daemon (the unrelated CA does not matter), the client
// certificate still offered.
TEST_F(DockerTlsTest, TlsWithoutVerification) {
  auto opts = OptionsFor({{"DOCKER_TLS", "1"}, {"DOCKER_CERT_PATH", dir_ + "/wrong-ca"}});
  ASSERT_TRUE(opts.ok()) << opts.status().message();
  EXPECT_THAT(opts->endpoint.Describe(), HasSubstr("(TLS, not verified)"));
  opts_ = *opts;
  opts_.image_check_period = std::chrono::milliseconds(0);  // no watchdog loop (see SetUp)
  executor_ = MakeDockerExecutor(io_.get_executor(), opts_);
  Status s = Await(executor_->Check());
  ASSERT_TRUE(s.ok()) << s.message();
  auto e = Execute({"python3", "-c", "import sys; print(sys.stdin.read().upper())"}, 10s,
                   std::string("unverified\n"));
  ASSERT_TRUE(e.outcome.ok()) << e.outcome.status().message();
  EXPECT_EQ(e.out, "UNVERIFIED\n\n");
}

}  // namespace
}  // namespace ci::docker

namespace ci::docker {
namespace {

// A tcp peer that accepts and never speaks: the TLS handshake is bounded by the call's timeout
// (no dockerd needed).
TEST(DockerTlsTimeout, SilentPeerTimesOutTheHandshake) {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  asio::ip::tcp::socket peer(io);
  acceptor.async_accept(peer, [](boost::system::error_code) {});
  std::string host = "tcp://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
  auto ep = ResolveEndpoint(
      [&](const char* n) -> const char* {
        std::string_view name(n);
        if (name == "DOCKER_HOST") return host.c_str();
        if (name == "DOCKER_TLS") return "1";
        if (name == "DOCKER_CERT_PATH") return "/nonexistent";
        return nullptr;
      },
      [](const std::string&) { return false; });
  ASSERT_TRUE(ep.ok()) << ep.status().message();
  EngineClient c(io.get_executor(), *ep, 300ms);
  auto start = std::chrono::steady_clock::now();
  Status s = testing_support::AwaitOn(io, c.Negotiate());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_EQ(s.message(),
            "docker at " + host + " (TLS, not verified): TLS handshake: no answer in time");
}

}  // namespace
}  // namespace ci::docker
