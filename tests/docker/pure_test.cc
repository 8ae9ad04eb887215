// The pure pieces of the Docker backend: DOCKER_HOST resolution, frame demux, tar, run args,
// image references, and SandboxSpec -> ContainerCreate against golden JSON.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "agent/agent_wire.h"
#include "agent/counter_files.h"
#include "common/golden.h"
#include "container/call_output.h"
#include "container/cgroup_probe.h"
#include "container/tar.h"
#include "core/json.h"
#include "docker/container_config.h"
#include "docker/docker_options.h"
#include "docker/endpoint.h"
#include "docker/image_watch.h"
#include "docker/stdcopy.h"

namespace ci::docker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Result<Endpoint> Resolve(std::map<std::string, std::string> env,
                         std::vector<std::string> existing = {"/var/run/docker.sock"}) {
  return ResolveEndpoint(
      [&](const char* n) -> const char* {
        auto it = env.find(n);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      [&](const std::string& p) {
        return std::find(existing.begin(), existing.end(), p) != existing.end();
      });
}

TEST(Endpoint, DefaultSocket) {
  auto e = Resolve({});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->kind, Endpoint::Kind::kUnix);
  EXPECT_EQ(e->socket_path, "/var/run/docker.sock");
  EXPECT_EQ(e->api_version, "");
}

TEST(Endpoint, RootlessSocketWhenSystemSocketIsAbsent) {
  auto e = Resolve({{"XDG_RUNTIME_DIR", "/run/user/1000"}}, {"/run/user/1000/docker.sock"});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->socket_path, "/run/user/1000/docker.sock");
  // The system socket wins when it exists.
  e = Resolve({{"XDG_RUNTIME_DIR", "/run/user/1000"}},
              {"/var/run/docker.sock", "/run/user/1000/docker.sock"});
  EXPECT_EQ(e->socket_path, "/var/run/docker.sock");
}

TEST(Endpoint, DockerHostForms) {
  auto e = Resolve({{"DOCKER_HOST", "unix:///tmp/d.sock"}});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->socket_path, "/tmp/d.sock");
  e = Resolve({{"DOCKER_HOST", "tcp://10.0.0.1"}});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->kind, Endpoint::Kind::kTcp);
  EXPECT_EQ(e->host, "10.0.0.1");
  EXPECT_EQ(e->port, 2375);
  EXPECT_FALSE(e->tls);
  e = Resolve({{"DOCKER_HOST", "tcp://[::1]:1234/base/"}});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->port, 1234);
  EXPECT_EQ(e->base_path, "/base");
  EXPECT_EQ(e->Describe(), "tcp://::1:1234/base");
}

TEST(Endpoint, TlsLikeTheDockerCli) {
  auto e = Resolve({{"DOCKER_HOST", "tcp://d.example:2376"},
                    {"DOCKER_TLS_VERIFY", "1"},
                    {"DOCKER_CERT_PATH", "/certs"}});
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->tls);
  EXPECT_TRUE(e->tls_verify);
  EXPECT_EQ(e->cert_path, "/certs");
  e = Resolve({{"DOCKER_HOST", "tcp://d.example"}, {"DOCKER_TLS", "1"}, {"HOME", "/root"}});
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->tls);
  EXPECT_FALSE(e->tls_verify);
  EXPECT_EQ(e->cert_path, "/root/.docker");
  EXPECT_EQ(e->port, 2376);
  // TLS is never used for sockets.
  e = Resolve({{"DOCKER_TLS_VERIFY", "1"}});
  EXPECT_FALSE(e->tls);
}

TEST(Endpoint, Errors) {
  EXPECT_THAT(Resolve({{"DOCKER_HOST", "ssh://me@host"}}).status().message(),
              HasSubstr("invalid DOCKER_HOST 'ssh://me@host'"));
  EXPECT_FALSE(Resolve({{"DOCKER_HOST", "tcp://h:99999"}}).ok());
  EXPECT_FALSE(Resolve({{"DOCKER_HOST", "unix://rel"}}).ok());
  EXPECT_THAT(Resolve({{"DOCKER_API_VERSION", "one"}}).status().message(),
              HasSubstr("DOCKER_API_VERSION"));
  auto e = Resolve({{"DOCKER_API_VERSION", "v1.43"}});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->api_version, "1.43");
}

TEST(Endpoint, ParseApiVersion) {
  EXPECT_EQ(ParseApiVersion("1.41"), 141);
  EXPECT_EQ(ParseApiVersion("1.50"), 150);
  EXPECT_EQ(ParseApiVersion("1.9"), 109);
  EXPECT_EQ(ParseApiVersion("1"), -1);
  EXPECT_EQ(ParseApiVersion("1.x"), -1);
}

std::string Frame(uint8_t stream, std::string_view payload) {
  std::string f = {static_cast<char>(stream), 0, 0, 0};
  uint32_t n = static_cast<uint32_t>(payload.size());
  for (int shift : {24, 16, 8, 0}) f.push_back(static_cast<char>((n >> shift) & 0xff));
  return f + std::string(payload);
}

TEST(FrameDemuxer, SplitsAtEveryByteBoundary) {
  std::string wire = Frame(1, "hello ") + Frame(2, "err\n") + Frame(1, "") + Frame(1, "world\n");
  for (size_t step = 1; step <= wire.size(); ++step) {
    std::string out, err;
    int calls = 0;
    FrameDemuxer d([&](FrameDemuxer::Stream s, std::string_view b) {
      ++calls;
      (s == FrameDemuxer::Stream::kStderr ? err : out) += b;
    });
    for (size_t i = 0; i < wire.size(); i += step) {
      ASSERT_TRUE(d.Feed(std::string_view(wire).substr(i, step)));
    }
    EXPECT_EQ(out, "hello world\n") << step;
    EXPECT_EQ(err, "err\n");
    EXPECT_TRUE(d.at_boundary());
    if (step == 1) {
      EXPECT_GT(calls, 10);  // streamed piece by piece, not buffered per frame
    }
  }
}

TEST(FrameDemuxer, RejectsUnknownStream) {
  FrameDemuxer d([](FrameDemuxer::Stream, std::string_view) {});
  EXPECT_FALSE(d.Feed(Frame(7, "x")));
  EXPECT_TRUE(d.failed());
}

TEST(FrameDemuxer, LargeFrameLength) {
  std::string big(70000, 'x');
  size_t got = 0;
  FrameDemuxer d([&](FrameDemuxer::Stream, std::string_view b) { got += b.size(); });
  std::string wire = Frame(1, big);
  EXPECT_TRUE(d.Feed(wire.substr(0, 5)));
  EXPECT_TRUE(d.Feed(wire.substr(5)));
  EXPECT_EQ(got, big.size());
}

struct Member {
  std::string path, data;
};

Result<std::vector<Member>> ReadAll(const std::string& archive, size_t step = 7) {
  std::vector<Member> out;
  container::TarReader r({[&](const std::string& p, uint64_t) {
                            out.push_back({p, ""});
                            return true;
                          },
                          [&](std::string_view b) {
                            out.back().data += b;
                            return Status();
                          },
                          [] { return Status(); }});
  for (size_t i = 0; i < archive.size(); i += step) {
    Status s = r.Feed(std::string_view(archive).substr(i, step));
    if (!s.ok()) return s;
  }
  return out;
}

std::string Archive(const std::vector<Member>& members) {
  std::string a = container::TarHeader("./dir", 0, true, 0755, 65532, 65532);
  for (const auto& m : members) {
    a += container::TarHeader(m.path, m.data.size(), false, 0644, 65532, 65532) + m.data +
         container::TarPadding(m.data.size());
  }
  return a + container::TarTrailer(a.size());
}

// GNU tar -x on a stdin that stays open (Kubernetes' v4 exec cannot close it) must end at the
// archive's end: only a whole last record lets it.
TEST(Tar, GnuTarExtractsAndExitsWithoutEndOfStdin) {
  for (size_t size : {size_t{0}, size_t{5}, size_t{9000}, size_t{10240}, size_t{30000}}) {
    std::string archive = Archive({{"f.bin", std::string(size, 'x')}});
    EXPECT_EQ(archive.size() % container::kTarRecord, 0u);
    char dir[] = "/tmp/tar-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    std::string d = dir;
    std::ofstream(d + "/a.tar", std::ios::binary) << archive;
    // The archive, then a stdin that only ends after 30 s: tar must be done well before.
    // The sleep's pid goes to a file (the right side may finish before the sleep started).
    std::string cmd = "cd " + d + " && { cat a.tar; sleep 30 & echo $! > sp; wait; } | " +
                      "{ timeout 20 tar -x -f -; echo $? > rc; " +
                      "while [ ! -s sp ]; do sleep 0.01; done; kill $(cat sp); } ; " +
                      "cat rc; wc -c < f.bin";
    FILE* p = ::popen(cmd.c_str(), "r");
    char buf[256] = {};
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    ::pclose(p);
    EXPECT_EQ(std::string(buf, n), "0\n" + std::to_string(size) + "\n") << "size " << size;
    std::system(("rm -rf " + d).c_str());
  }
}

TEST(Tar, RoundTripIncludingLongNames) {
  std::string long_dir(120, 'd'), very_long(300, 'v');
  std::vector<Member> in = {{"a.txt", "hello"},
                            {"dir/.hidden", ""},
                            {long_dir + "/x.csv", std::string(1000, 'y')},
                            {very_long, "z"},
                            {"exact512", std::string(512, 'q')}};
  auto out = ReadAll(Archive(in));
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ((*out)[i].path, in[i].path);
    EXPECT_EQ((*out)[i].data, in[i].data);
  }
}

TEST(Tar, ReadsWhatGnuTarWrites) {
  char dir[] = "/tmp/tar-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string d = dir;
  std::string deep = d + "/src/" + std::string(110, 'n');
  ASSERT_EQ(std::system(("mkdir -p " + deep + " && printf abc > " + deep + "/f && printf 12 > " +
                         d + "/src/.env && ln -s .env " + d + "/src/link && tar -c -C " + d +
                         "/src . > " + d + "/a.tar")
                            .c_str()),
            0);
  std::ifstream f(d + "/a.tar", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  auto out = ReadAll(ss.str(), 100);
  ASSERT_TRUE(out.ok()) << out.status().message();
  std::map<std::string, std::string> got;
  for (auto& m : *out) got[m.path] = m.data;
  EXPECT_EQ(got.size(), 2u);  // the symlink and directories are skipped
  EXPECT_EQ(got[".env"], "12");
  EXPECT_EQ(got[std::string(110, 'n') + "/f"], "abc");
  std::system(("rm -rf " + d).c_str());
}

// Runs a shell command in a fresh directory and reads the archive it leaves in a.tar.
std::string GnuTarOf(const std::string& setup, std::string* dir_out) {
  char dir[] = "/tmp/tar-test-XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  std::string d = dir;
  *dir_out = d;
  EXPECT_EQ(std::system(("cd " + d + " && mkdir src && cd src && " + setup +
                         " && tar -c --sparse --format=gnu -C " + d + "/src . > " + d + "/a.tar")
                            .c_str()),
            0);
  std::ifstream f(d + "/a.tar", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Tar, SparseMembersKeepTheirHoles) {
  // 50 GiB with 4 bytes at 0 and 3 at 20 GiB, the rest hole: a few KiB of archive.
  std::string d;
  std::string archive = GnuTarOf(
      "printf abc > small && python3 -c \"f=open('sp','wb'); f.write(b'HEAD'); "
      "f.seek(20<<30); f.write(b'MID'); f.truncate(50<<30)\"",
      &d);
  ASSERT_LT(archive.size(), 1u << 20);
  struct Got {
    uint64_t size = 0, logical = 0, holes = 0;
    std::map<uint64_t, std::string> data;  // offset -> bytes
  };
  std::map<std::string, Got> got;
  std::string current;
  container::TarReader r({[&](const std::string& p, uint64_t size) {
                            current = p;
                            got[p].size = size;
                            return true;
                          },
                          [&](std::string_view b) {
                            Got& g = got[current];
                            g.data[g.logical] += b;
                            g.logical += b.size();
                            return Status();
                          },
                          [] { return Status(); },
                          [&](uint64_t n) {
                            got[current].logical += n;
                            got[current].holes += n;
                            return Status();
                          }});
  for (size_t i = 0; i < archive.size(); i += 100) {
    Status s = r.Feed(std::string_view(archive).substr(i, 100));
    ASSERT_TRUE(s.ok()) << s.message();
  }
  EXPECT_TRUE(r.finished());
  ASSERT_EQ(got.count("sp"), 1u);
  const Got& sp = got["sp"];
  EXPECT_EQ(sp.size, uint64_t{50} << 30);
  EXPECT_EQ(sp.logical, uint64_t{50} << 30);
  std::string all;
  for (const auto& [offset, bytes] : sp.data) {
    // tar stores whole blocks around the data: strip their zeros to compare.
    std::string trimmed = bytes.substr(0, bytes.find_last_not_of('\0') + 1);
    if (!trimmed.empty()) all += std::to_string(offset) + ":" + trimmed + ";";
  }
  EXPECT_EQ(all, "0:HEAD;" + std::to_string(uint64_t{20} << 30) + ":MID;");
  EXPECT_EQ(got["small"].size, 3u);
  EXPECT_EQ(got["small"].data[0], "abc");
  std::system(("rm -rf " + d).c_str());
}

TEST(Tar, LongSparseMapsReadBackExactly) {
  // 30 pieces of data 1 MiB apart: more than the 4 map entries of the header, so extension
  // blocks follow. Without a hole callback the holes come as zeros: the bytes must match.
  std::string d;
  std::string archive = GnuTarOf(
      "python3 -c \"f=open('many','wb')\n"
      "for i in range(30): f.seek(i<<20); f.write(b'piece%d' % i)\n"
      "f.truncate(31<<20)\"",
      &d);
  auto out = ReadAll(archive, 333);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->size(), 1u);
  std::ifstream f(d + "/src/many", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ((*out)[0].data.size(), size_t{31} << 20);
  EXPECT_TRUE((*out)[0].data == ss.str()) << "the pieces are not where the file has them";
  // A map that claims more data than the member has is refused, not trusted.
  std::string bad = archive;
  size_t at = bad.find("many");
  ASSERT_NE(at, std::string::npos);
  bad[at + 386 + 12 + 10] = static_cast<char>(bad[at + 386 + 12 + 10] ^ 1);  // a piece's length
  unsigned sum = 0;
  for (size_t i = 0; i < 512; ++i) {
    sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(bad[at + i]);
  }
  std::snprintf(&bad[at + 148], 8, "%06o", sum);
  EXPECT_FALSE(ReadAll(bad, 333).ok()) << "a sparse map not matching the member's data";
  std::system(("rm -rf " + d).c_str());
}

TEST(Tar, RefusesEscapingPaths) {
  EXPECT_FALSE(ReadAll(Archive({{"../x", "1"}})).ok());
  EXPECT_FALSE(ReadAll(Archive({{"a/../../x", "1"}})).ok());
  EXPECT_FALSE(ReadAll(Archive({{"/etc/passwd", "1"}})).ok());
}

TEST(Tar, StopsWhenAsked) {
  int seen = 0;
  container::TarReader r({[&](const std::string&, uint64_t) { return ++seen < 2; },
                          [](std::string_view) { return Status(); }, [] { return Status(); }});
  EXPECT_TRUE(r.Feed(Archive({{"a", "1"}, {"b", "2"}, {"c", "3"}})).ok());
  EXPECT_TRUE(r.stopped());
  EXPECT_EQ(seen, 2);
}

TEST(RunArgs, ShellQuoting) {
  auto w = ShellSplit(R"(-l 'a b=c d' --env="X=\"q\" $y" e\ f)");
  ASSERT_TRUE(w.ok());
  EXPECT_THAT(*w, ElementsAre("-l", "a b=c d", "--env=X=\"q\" $y", "e f"));
  EXPECT_FALSE(ShellSplit("'open").ok());
  EXPECT_FALSE(ShellSplit("\"open").ok());
}

TEST(RunArgs, Subset) {
  auto a = ParseRunArgs(
      "--label team=ml -l 'note=two words' -e A=1 --env=B=2 --add-host db:10.0.0.2 --dns 1.1.1.1 "
      "--ulimit nofile=256:512 --ulimit=nproc=100");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->labels.at("team"), "ml");
  EXPECT_EQ(a->labels.at("note"), "two words");
  EXPECT_THAT(a->env, ElementsAre("A=1", "B=2"));
  EXPECT_THAT(a->extra_hosts, ElementsAre("db:10.0.0.2"));
  EXPECT_THAT(a->dns, ElementsAre("1.1.1.1"));
  ASSERT_EQ(a->ulimits.size(), 2u);
  EXPECT_EQ(a->ulimits[0].soft, 256);
  EXPECT_EQ(a->ulimits[0].hard, 512);
  EXPECT_EQ(a->ulimits[1].hard, 100);
  EXPECT_TRUE(ParseRunArgs("").ok());
}

TEST(RunArgs, OtherFlagsAreRefusedByName) {
  auto a = ParseRunArgs("-e A=1 --privileged");
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("'--privileged' is not supported"));
  EXPECT_THAT(ParseRunArgs("-v /:/host").status().message(), HasSubstr("'-v'"));
  EXPECT_THAT(ParseRunArgs("--network=host").status().message(), HasSubstr("'--network'"));
  EXPECT_FALSE(ParseRunArgs("--label").ok());
  EXPECT_FALSE(ParseRunArgs("-e NOVALUE").ok());
  EXPECT_FALSE(ParseRunArgs("--ulimit bogus=1").ok());
  EXPECT_FALSE(ParseRunArgs("--label app=evil").ok());
}

TEST(ImageRef, Normalised) {
  EXPECT_EQ(NormalizeImageRef("python"), "python:latest");
  EXPECT_EQ(NormalizeImageRef("python:3.11-slim"), "python:3.11-slim");
  EXPECT_EQ(NormalizeImageRef("reg.local:5000/team/exec"), "reg.local:5000/team/exec:latest");
  EXPECT_EQ(NormalizeImageRef("reg.local:5000/team/exec:v2"), "reg.local:5000/team/exec:v2");
  EXPECT_EQ(NormalizeImageRef("exec@sha256:abcd"), "exec@sha256:abcd");
}

TEST(ImageRef, SplitForThePull) {
  auto split = [](const char* ref) {
    ImageName n = SplitImageRef(ref);
    return n.repo + " " + n.tag;
  };
  EXPECT_EQ(split("python:latest"), "python latest");
  EXPECT_EQ(split("reg.local:5000/team/exec:v2"), "reg.local:5000/team/exec v2");
  EXPECT_EQ(split("reg.local:5000/team/exec"), "reg.local:5000/team/exec latest");
  EXPECT_EQ(split("exec@sha256:abcd"), "exec sha256:abcd");
  EXPECT_EQ(split("127.0.0.1:5000/exec:v1@sha256:abcd"), "127.0.0.1:5000/exec sha256:abcd");
}

TEST(PullProgress, LayerStatusChangesAndAtMostOneByteLineEveryPeriod) {
  using Clock = PullProgress::Clock;
  std::vector<std::string> lines;
  auto t0 = Clock::time_point{} + std::chrono::hours(1);
  PullProgress p([&](const std::string& l) { lines.push_back(l); }, std::chrono::seconds(5), t0);
  auto at = [&](int ms) { return t0 + std::chrono::milliseconds(ms); };
  p.Feed(R"({"status":"Pulling from team/exec","id":"v1"})", at(0));
  p.Feed(R"({"status":"Pulling fs layer","progressDetail":{},"id":"aaa"})", at(1));
  p.Feed(R"({"status":"Pulling fs layer","progressDetail":{},"id":"bbb"})", at(2));
  // 100 progress messages over 12 s: one status line, then a byte line at 5 s and at 10 s.
  for (int i = 1; i <= 100; ++i) {
    std::string m = R"({"status":"Downloading","progressDetail":{"current":)" +
                    std::to_string(i * 10000) +
                    R"(,"total":1000000},"progress":"[=> ]","id":"aaa"})";
    p.Feed(m, at(i * 120));
  }
  p.Feed(R"({"status":"Download complete","progressDetail":{},"id":"aaa"})", at(12001));
  p.Feed(R"({"status":"Pull complete","progressDetail":{},"id":"aaa"})", at(12002));
  p.Feed(R"({"status":"Already exists","progressDetail":{},"id":"bbb"})", at(12003));
  p.Feed("not json", at(12004));
  p.Feed(R"({"status":"Digest: sha256:1234"})", at(12005));
  p.Feed(R"({"status":"Status: Downloaded newer image for team/exec:v1"})", at(12006));
  EXPECT_THAT(lines, ElementsAre("Pulling from team/exec", "layer aaa: Pulling fs layer",
                                 "layer bbb: Pulling fs layer", "layer aaa: Downloading",
                                 "420.0 kB of 1.0 MB downloaded, 0 of 2 layers complete",
                                 "840.0 kB of 1.0 MB downloaded, 0 of 2 layers complete",
                                 "layer aaa: Download complete", "layer aaa: Pull complete",
                                 "layer bbb: Already exists", "Digest: sha256:1234",
                                 "Status: Downloaded newer image for team/exec:v1"));
  EXPECT_FALSE(p.error().has_value());
  EXPECT_EQ(p.Summary(), "1.0 MB of 1.0 MB downloaded, 2 of 2 layers complete");
}

TEST(PullProgress, AnErrorLineIsTheFailure) {
  auto t0 = PullProgress::Clock::now();
  PullProgress a([](const std::string&) {}, std::chrono::seconds(5), t0);
  a.Feed(R"({"status":"Pulling fs layer","id":"aaa"})", t0);
  a.Feed(R"({"errorDetail":{"message":"unexpected EOF"},"error":"unexpected EOF"})", t0);
  ASSERT_TRUE(a.error().has_value());
  EXPECT_EQ(*a.error(), "unexpected EOF");
  PullProgress b([](const std::string&) {}, std::chrono::seconds(5), t0);
  b.Feed(R"({"error":"manifest unknown"})", t0);  // the deprecated field alone
  ASSERT_TRUE(b.error().has_value());
  EXPECT_EQ(*b.error(), "manifest unknown");
}

TEST(HumanBytes, DecimalUnits) {
  EXPECT_EQ(HumanBytes(999), "999 B");
  EXPECT_EQ(HumanBytes(1500), "1.5 kB");
  EXPECT_EQ(HumanBytes(45600000), "45.6 MB");
  EXPECT_EQ(HumanBytes(1200000000), "1.20 GB");
}

// Golden files: tests/docker/golden/<name>.json (common/golden.h; UPDATE_GOLDEN=1 rewrites them).
void ExpectGolden(const std::string& name, const std::string& actual) {
  testing_support::ExpectGolden(CI_DOCKER_GOLDEN_DIR, name, actual);
}

SandboxSpec DefaultSpec() {
  SandboxSpec spec;
  spec.env = DefaultSandboxEnv();
  return spec;
}

ContainerOptions Options() {
  ContainerOptions o;
  o.image = "code-interpreter-executor:latest";
  o.expires_at = 1700000000;
  o.cmd = {"sleep", "infinity"};
  return o;
}

TEST(ContainerCreate, Defaults) {
  ExpectGolden("default", ContainerCreateJson(DefaultSpec(), Options()));
}

TEST(ContainerCreate, SeccompLimitsNetworkAndRunArgs) {
  SandboxSpec spec = DefaultSpec();
  spec.security.seccomp_profile_json =
      R"({"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"}]})";
  spec.limits.memory_bytes = 512ull << 20;
  spec.limits.pids = 32;
  spec.limits.cpu_time_sec = 10;
  spec.limits.workspace_bytes = 10ull << 20;
  spec.limits.tmp_bytes = 5ull << 20;
  spec.limits.cpu_percent = 50;  // CpuQuota 50000 per CpuPeriod 100000, as local's cpu.max
  ContainerOptions o = Options();
  o.network = "isolated-net";
  o.component = "session";
  auto extra = ParseRunArgs(
      "-l team=ml -e PYTHONIOENCODING=latin-1 -e EXTRA=1 --add-host "
      "db:10.0.0.2 --dns 10.0.0.53 --ulimit nofile=128:256 --ulimit cpu=3:4");
  ASSERT_TRUE(extra.ok());
  o.extra = *extra;
  ExpectGolden("hardened_custom", ContainerCreateJson(spec, o));
}

// Sessions: no container-wide RLIMIT_CPU (each run's wrapper sets the program's own), so a
// background interpreter is not killed by the sum of its calls; everything else as executions.
TEST(ContainerCreate, SessionHasNoContainerWideCpuLimit) {
  ContainerOptions o = Options();
  o.component = "session";
  o.cpu_rlimit_per_run = true;
  std::string json = ContainerCreateJson(DefaultSpec(), o);
  EXPECT_NE(json.find(R"({"Name":"cpu","Soft":-1,"Hard":-1})"), std::string::npos) << json;
  EXPECT_NE(json.find(R"({"Name":"core","Soft":0,"Hard":0})"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("component":"session")"), std::string::npos) << json;
}

// The report is read from the body: a CPU cap only with CpuQuota, seccomp only with a profile
// (never "when configured"), RLIMIT_CPU as the body's ulimit or the session wrapper's.
TEST(ContainerCreate, MeasuresAreReadFromTheBody) {
  SandboxSpec spec = DefaultSpec();
  auto names = [](const ContainerCreate& c) { return MeasureNames(ContainerMeasures(c)); };
  ContainerCreate plain = ContainerCreateFromSpec(spec, Options());
  EXPECT_THAT(
      names(plain),
      ::testing::ElementsAre(
          "pid namespace (docker)", "mount namespace (docker)", "network namespace (loopback only)",
          "no capabilities (docker CapDrop ALL)", "read-only root (docker)",
          "no_new_privs (docker)", "memory limit 256 MiB (docker, no swap)",
          "pids limit 64 (docker)", "CPU time limit 5 s (RLIMIT_CPU)",
          "open files limit 1024 (docker ulimit)", "queued signals limit 1024 (docker ulimit)",
          "message queue limit 800 KiB (docker ulimit)",
          "locked memory limit 8 MiB (docker ulimit)", "no controlling terminal (docker, no tty)"));
  spec.limits.cpu_percent = 50;
  spec.security.seccomp_profile_json = R"({"defaultAction":"SCMP_ACT_ALLOW"})";
  spec.security.seccomp_profile_name = "strict";
  ContainerCreate hardened = ContainerCreateFromSpec(spec, Options());
  EXPECT_EQ(hardened.cpu_quota, 50000);
  EXPECT_EQ(hardened.cpu_period, 100000);
  EXPECT_THAT(names(hardened), ::testing::IsSupersetOf(
                                   {"seccomp (strict profile)", "CPU cap 50% (docker CpuQuota)"}));
  ContainerOptions session = Options();
  session.cpu_rlimit_per_run = true;
  session.network = "isolated-net";
  auto session_names = names(ContainerCreateFromSpec(spec, session));
  EXPECT_THAT(session_names, ::testing::Contains("CPU time limit 5 s (RLIMIT_CPU, set per call)"));
  EXPECT_THAT(session_names,
              ::testing::Not(::testing::Contains("network namespace (loopback only)")));
}

// SECCOMP_LOG_DENIED on docker as on local: every denial becomes SCMP_ACT_LOG, and the report
// names it a downgrade instead of an enforced seccomp filter.
TEST(ContainerCreate, LogDeniedMakesTheProfileLogOnly) {
  EXPECT_EQ(LogOnlySeccompProfile(
                R"({"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":)"
                R"("SCMP_ACT_ALLOW"},{"names":["mkdir"],"action":"SCMP_ACT_ERRNO"}]})"),
            R"({"defaultAction":"SCMP_ACT_LOG","syscalls":[{"names":["read"],"action":)"
            R"("SCMP_ACT_ALLOW"},{"names":["mkdir"],"action":"SCMP_ACT_LOG"}]})");
  SandboxSpec spec = DefaultSpec();
  spec.security.seccomp_profile_json = R"({"defaultAction":"SCMP_ACT_ERRNO"})";
  spec.security.seccomp_log_denied = true;
  ContainerCreate c = ContainerCreateFromSpec(spec, Options());
  EXPECT_THAT(c.security_opt, ::testing::Contains(R"(seccomp={"defaultAction":"SCMP_ACT_LOG"})"));
  for (const Measure& m : ContainerMeasures(c)) EXPECT_NE(m.kind, MeasureKind::kSeccomp);
}

// --- cgroup counters (cgroup_probe.h) ---

constexpr const char* kId = "56add456c532ff113ec988852f230f51471a5cb226dd726184a9561f785975d8";

TEST(CgroupProbe, FindsV1ControllerDirectories) {
  std::string id = kId;
  std::string cgroup = "9:name=systemd:/docker/" + id + "\n8:pids:/docker/" + id +
                       "\n4:memory:/docker/" + id + "\n2:cpu,cpuacct:/docker/" + id +
                       "\n0::/docker/" + id + "\n";
  std::string mountinfo =
      "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
      "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
      "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
  container::HostCgroup cg;
  std::string why;
  ASSERT_TRUE(container::FindContainerCgroup(cgroup, mountinfo, id, &cg, &why)) << why;
  EXPECT_FALSE(cg.v2);
  EXPECT_EQ(cg.memory, "/sys/fs/cgroup/memory/docker/" + id);
  EXPECT_EQ(cg.pids, "/sys/fs/cgroup/pids/docker/" + id);
  EXPECT_EQ(cg.cpuacct, "/sys/fs/cgroup/cpu,cpuacct/docker/" + id);
  EXPECT_EQ(cg.procs_dir(), cg.pids);
}

TEST(CgroupProbe, FindsV2DirectoryThroughANestedMountRoot) {
  std::string id = kId;
  std::string cgroup = "0::/system.slice/docker-" + id + ".scope\n";
  std::string mountinfo =
      "30 23 0:27 /system.slice /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
  container::HostCgroup cg;
  std::string why;
  ASSERT_TRUE(container::FindContainerCgroup(cgroup, mountinfo, id, &cg, &why)) << why;
  EXPECT_TRUE(cg.v2);
  EXPECT_EQ(cg.unified, "/sys/fs/cgroup/docker-" + id + ".scope");
}

TEST(CgroupProbe, RefusesAPidThatIsNotTheContainers) {
  std::string cgroup = "0::/user.slice/session-1.scope\n";
  std::string mountinfo = "30 23 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  container::HostCgroup cg;
  std::string why;
  EXPECT_FALSE(container::FindContainerCgroup(cgroup, mountinfo, kId, &cg, &why));
  EXPECT_THAT(why, HasSubstr("does not name the container"));
}

TEST(CgroupProbe, ParsesV1AndV2Counters) {
  auto v1 = container::ParseCgroupFiles(
      {{"memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"},
       {"memory.max_usage_in_bytes", "104857600\n"},
       {"pids.events", "max 0\n"},
       {"cpuacct.usage", "2500000000\n"}});
  EXPECT_TRUE(v1.any);
  EXPECT_TRUE(v1.oom_killed);
  EXPECT_FALSE(v1.pids_limit_hit);
  EXPECT_EQ(v1.memory_peak_bytes, 104857600u);
  EXPECT_TRUE(v1.has_cpu);
  EXPECT_EQ(v1.cpu_ms, 2500u);
  auto v2 =
      container::ParseCgroupFiles({{"memory.events", "low 0\nhigh 0\nmax 3\noom 0\noom_kill 0\n"},
                                   {"pids.events", "max 12\n"},
                                   {"memory.peak", "4096\n"},
                                   {"cpu.stat", "usage_usec 1234567\nuser_usec 1000000\n"}});
  EXPECT_FALSE(v2.oom_killed);
  EXPECT_TRUE(v2.pids_limit_hit);
  EXPECT_EQ(v2.memory_peak_bytes, 4096u);
  EXPECT_EQ(v2.cpu_ms, 1234u);
  EXPECT_FALSE(container::ParseCgroupFiles({}).any);
}

TEST(CgroupProbe, SplitsTheInContainerProbeOutput) {
  auto files = container::SplitProbeOutput("@pids.events\nmax 5\n@cpuacct.usage\n1000000\n");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files["pids.events"], "max 5\n");
  EXPECT_EQ(files["cpuacct.usage"], "1000000\n");
  EXPECT_TRUE(container::ParseCgroupFiles(files).pids_limit_hit);
  EXPECT_EQ(container::ParseCgroupFiles({{"procs.cpu", "123\n"}}).processes_cpu_ms, 1230u);
}

// What `script` prints under /bin/sh here (a failed run is the test's).
std::string RunProbe(const char* script) {
  const std::string command = std::string("/bin/sh -c '") + script + "'";
  FILE* probe = popen(command.c_str(), "r");
  EXPECT_NE(probe, nullptr);
  if (probe == nullptr) return "";
  std::string text;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, probe)) > 0;) text.append(buf, n);
  EXPECT_EQ(pclose(probe), 0) << text;
  return text;
}

// The sessions' probe sums the CPU of the processes it sees: this one's, after 300 ms of it.
TEST(CgroupProbe, CountersScriptSumsTheProcessesCpu) {
  const clock_t start = clock();
  while (clock() - start < CLOCKS_PER_SEC * 3 / 10) {
  }
  const std::string text = RunProbe(container::kInContainerCountersScript);
  auto counters = container::ParseCgroupFiles(container::SplitProbeOutput(text));
  ASSERT_TRUE(counters.has_processes_cpu) << text;
  EXPECT_GE(counters.processes_cpu_ms, 300u) << text;
}

// A recycled pod's probe (agent_container.cc) counts the processes of the cgroup /sys/fs/cgroup
// shows (in a pod, the pod's own; here the host's top one, whose count changes under the test).
TEST(CgroupProbe, RecycledProbeCountsTheCgroupsProcesses) {
  const std::string text = RunProbe(container::kRecycledProbeScript);
  const int count = container::RecycledProcessCount(container::SplitProbeOutput(text));
  const bool readable = ::access("/sys/fs/cgroup/cgroup.procs", R_OK) == 0 ||
                        ::access("/sys/fs/cgroup/pids/cgroup.procs", R_OK) == 0;
  EXPECT_EQ(count >= 0, readable) << text;
  EXPECT_EQ(container::RecycledProcessCount({{"cgroup.procs", "3\n"}}), 3);
  EXPECT_EQ(container::RecycledProcessCount({}), -1);
  EXPECT_EQ(container::RecycledProcessCount({{"cgroup.procs", "x\n"}}), -1);
}

// The agent reads the counter files into the probe scripts' text (kReadCounters): the same bytes
// for the same files (here a made-up cgroup directory, one file without its last newline).
TEST(CgroupProbe, TheAgentReadsTheCountersIntoTheProbesText) {
  char dir_template[] = "/tmp/counters-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string root = dir_template;
  const std::map<std::string, std::string> files = {
      {"memory.events", "low 0\noom 1\noom_kill 2\n"},
      {"pids.events", "max 3"},
      {"cpu.stat", "usage_usec 5000\nuser_usec 4000\n"},
      {"cgroup.procs", "1\n7\n9\n"}};
  for (const auto& [name, content] : files) std::ofstream(root + "/" + name) << content;
  std::string script = container::kRecycledProbeScript;
  std::string names;
  for (const char* f : agent::kCounterFiles) names += std::string(names.empty() ? "" : " ") + f;
  EXPECT_NE(script.find("for f in " + names + "; do"), std::string::npos) << "the same files";
  script.replace(script.find("/sys/fs/cgroup"), 14, root);
  const std::string agents = agent::ReadCounterFiles(agent::kCountProcesses, root, "/nonexistent");
  EXPECT_EQ(agents, RunProbe(script.c_str()));
  auto counters = container::ParseCgroupFiles(container::SplitProbeOutput(agents));
  EXPECT_EQ(counters.oom_kills, 2u);
  EXPECT_EQ(counters.cpu_ms, 5u);
  EXPECT_EQ(container::RecycledProcessCount(container::SplitProbeOutput(agents)), 3);
  for (const auto& [name, content] : files) ::unlink((root + "/" + name).c_str());
  ::rmdir(root.c_str());
}

// The sessions' idle CPU: every process's utime, stime, cutime and cstime but the agent's own,
// whatever its command name holds.
TEST(CgroupProbe, TheAgentSumsEveryProcessesCpuButItsOwn) {
  char dir_template[] = "/tmp/proc-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string proc = dir_template;
  const std::map<std::string, std::string> stats = {
      {"7", "7 (a) b) R 1 7 7 0 -1 0 0 0 0 0 10 20 3 4 20 0 1 0\n"},
      {"9", "9 (sh) S 1 9 9 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0\n"},
      {std::to_string(::getpid()), "1 (agent) S 0 1 1 0 -1 0 0 0 0 0 500 500 0 0 20 0 1 0\n"},
      {"self", "not a process"}};
  for (const auto& [pid, stat] : stats) {
    ASSERT_EQ(::mkdir((proc + "/" + pid).c_str(), 0755), 0);
    std::ofstream(proc + "/" + pid + "/stat") << stat;
  }
  const std::string text = agent::ReadCounterFiles(agent::kProcessesCpu, "/nonexistent", proc);
  EXPECT_EQ(text, "@procs.cpu\n39\n");
  for (const auto& [pid, stat] : stats) {
    ::unlink((proc + "/" + pid + "/stat").c_str());
    ::rmdir((proc + "/" + pid).c_str());
  }
  ::rmdir(proc.c_str());
}

}  // namespace
}  // namespace ci::docker

namespace ci::docker {
namespace {

// The end marker of a session call (python_session.cc writes it, call_output.h splits at it).
TEST(CallOutput, SplitsAtTheMarkerAcrossChunksAndDropsWhatFollows) {
  const std::string nonce(32, 'a');
  container::CallOutput out;
  EXPECT_EQ(out.Feed("before any call"), "");  // between calls: dropped
  out.Begin(nonce);
  std::string got = out.Feed("hello \x1e not a marker ");
  got += out.Feed("tail\x1e" + nonce.substr(0, 10));
  EXPECT_FALSE(out.ended());
  got += out.Feed(nonce.substr(10) + "04");
  EXPECT_FALSE(out.ended()) << "the status has not arrived whole";
  got += out.Feed("21\nlater output");
  EXPECT_EQ(got, "hello \x1e not a marker tail");
  ASSERT_TRUE(out.ended());
  EXPECT_EQ(out.status(), 42);
  EXPECT_EQ(out.flags(), 1);
  EXPECT_EQ(out.Feed("after the call"), "");
}

TEST(CallOutput, AnotherCallsNonceIsOutput) {
  container::CallOutput out;
  out.Begin(std::string(32, 'b'));
  const std::string forged = "\x1e" + std::string(32, 'c') + "0000\n";
  EXPECT_EQ(out.Feed(forged), forged);
  EXPECT_FALSE(out.ended());
}

}  // namespace
}  // namespace ci::docker

namespace ci::docker {
namespace {

// The Docker backend's variables go through the same EnvReader as the daemon's configuration.
TEST(DockerOptions, SecondsAreCheckedAndNamed) {
  auto with = [](std::map<std::string, std::string> env) {
    env.emplace("DOCKER_HOST", "tcp://127.0.0.1:1");
    return DockerOptionsFromEnv([env](const char* n) -> const char* {
      auto it = env.find(n);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  };
  auto ok = with({{"PYTHON_EXECUTOR_DOCKER_PULL_TIMEOUT_SEC", "90"}});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->pull_timeout, std::chrono::seconds(90));
  for (const char* bad : {"0", "x", "86401", ""}) {
    auto r = with({{"PYTHON_EXECUTOR_DOCKER_IMAGE_CHECK_INTERVAL_SEC", bad}});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(),
                ::testing::HasSubstr("PYTHON_EXECUTOR_DOCKER_IMAGE_CHECK_INTERVAL_SEC='"));
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr("from 1 to 86400"));
  }
}

}  // namespace
}  // namespace ci::docker
