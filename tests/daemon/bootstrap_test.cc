// Bootstrap's pure parts: which deployment mode facts lead to, the nested dockerd's daemon.json,
// what the Engine's /info says, the import's query, and cgroup nesting on a directory tree.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "daemon/bootstrap/cgroup_nesting.h"
#include "daemon/bootstrap/deployment_mode.h"
#include "daemon/bootstrap/dockerd_config.h"
#include "docker/engine_info.h"
#include "docker/image_import.h"

namespace ci::daemon {
namespace {

namespace fs = std::filesystem;

DeploymentMode Mode(const HostFacts& f) {
  auto d = DetectMode(f);
  EXPECT_TRUE(d.ok()) << d.status().message();
  return d.ok() ? d->mode : DeploymentMode::kHost;
}

HostFacts Dind() {
  HostFacts f;
  f.in_container = true;
  f.dockerd = "/usr/sbin/dockerd";
  f.privileged = true;
  return f;
}

TEST(DeploymentModeTest, DetectsInTheIssuesOrder) {
  HostFacts f = Dind();
  f.docker_socket = "/var/run/docker.sock";
  f.docker_host = "tcp://engine:2376";
  f.in_cluster = true;
  EXPECT_EQ(Mode(f), DeploymentMode::kKubernetes);
  f.in_cluster = false;
  EXPECT_EQ(Mode(f), DeploymentMode::kDocker);  // DOCKER_HOST names the Engine
  f.docker_host.clear();
  EXPECT_EQ(Mode(f), DeploymentMode::kDood);  // a socket mounted into this container
  f.docker_socket.clear();
  EXPECT_EQ(Mode(f), DeploymentMode::kDind);
  EXPECT_EQ(Mode(HostFacts{}), DeploymentMode::kHost);
}

TEST(DeploymentModeTest, ASocketOnAHostIsNotDood) {
  HostFacts f;
  f.docker_socket = "/var/run/docker.sock";
  EXPECT_EQ(Mode(f), DeploymentMode::kDocker);
}

TEST(DeploymentModeTest, DockerdInAnUnprivilegedContainerSaysWhatToDo) {
  HostFacts f = Dind();
  f.privileged = false;
  auto d = DetectMode(f);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("--privileged"), std::string::npos);
  EXPECT_NE(d.status().message().find("/var/run/docker.sock"), std::string::npos);
  f.in_container = false;  // dockerd installed on a host: the local runtime
  EXPECT_EQ(Mode(f), DeploymentMode::kHost);
}

TEST(DeploymentModeTest, AnExplicitBackendNamesItsMode) {
  HostFacts in_container = Dind();
  EXPECT_EQ(ModeOfBackend("local", in_container), DeploymentMode::kHost);
  EXPECT_EQ(ModeOfBackend("kubernetes", in_container), DeploymentMode::kKubernetes);
  EXPECT_EQ(ModeOfBackend("docker", in_container), DeploymentMode::kDood);
  in_container.docker_host = "unix:///elsewhere.sock";
  EXPECT_EQ(ModeOfBackend("docker", in_container), DeploymentMode::kDocker);
  EXPECT_EQ(ModeOfBackend("docker", HostFacts{}), DeploymentMode::kDocker);
  EXPECT_EQ(BackendOf(DeploymentMode::kDind), "docker");
  EXPECT_EQ(DeploymentModeName(DeploymentMode::kDind), "dind");
}

TEST(DockerdConfigTest, NoNetworkMeansNoBridgeAtAll) {
  DockerdSettings s;
  EXPECT_EQ(DaemonJson(s),
            R"({"data-root":"/var/lib/code-interpreter/docker",)"
            R"("exec-root":"/run/code-interpreter/dockerd/exec",)"
            R"("pidfile":"/run/code-interpreter/dockerd/docker.pid",)"
            R"("hosts":["unix:///run/code-interpreter/dockerd/docker.sock"],)"
            R"("storage-driver":"overlay2","no-new-privileges":true,)"
            R"("seccomp-profile":"/run/code-interpreter/dockerd/seccomp-executor.json",)"
            R"("userland-proxy":false,"live-restore":false,"bridge":"none","iptables":false,)"
            R"("ip-forward":false,"ip-masq":false,"log-level":"warn"})");
  EXPECT_EQ(DockerdArgv(s),
            (std::vector<std::string>{"/usr/sbin/dockerd", "--config-file",
                                      "/run/code-interpreter/dockerd/daemon.json"}));
}

TEST(DockerdConfigTest, WithANetworkTheBridgeKeepsContainersApart) {
  DockerdSettings s;
  s.executor_network = true;
  s.storage_driver = "vfs";
  s.userns_remap = true;
  std::string json = DaemonJson(s);
  EXPECT_NE(json.find(R"("userns-remap":"default")"), std::string::npos);
  EXPECT_NE(json.find(R"("icc":false)"), std::string::npos);
  EXPECT_NE(json.find(R"("storage-driver":"vfs")"), std::string::npos);
  EXPECT_EQ(json.find("bridge"), std::string::npos);
  EXPECT_EQ(json.find("iptables"), std::string::npos);       // dockerd's own default: on
  EXPECT_EQ(json.find("cgroup-parent"), std::string::npos);  // dockerd's default: /docker
  s.cgroup_parent = "/system.slice/docker-1.scope/docker";
  EXPECT_NE(DaemonJson(s).find(R"("cgroup-parent":"/system.slice/docker-1.scope/docker")"),
            std::string::npos);
}

TEST(EngineInfoTest, RootlessIsASecurityOption) {
  auto info = docker::ParseEngineInfo(
      R"({"ServerVersion":"20.10.24","CgroupVersion":"2","CgroupDriver":"systemd",)"
      R"("Driver":"overlay2","SecurityOptions":["name=seccomp,profile=default",)"
      R"("name=rootless","name=cgroupns"],"Warnings":["WARNING: No cpu cfs quota support"]})");
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_TRUE(info->rootless);
  EXPECT_EQ(info->security_options, (std::vector<std::string>{"seccomp", "rootless", "cgroupns"}));
  EXPECT_EQ(info->cgroup_version, "2");
  EXPECT_EQ(info->storage_driver, "overlay2");
  EXPECT_EQ(info->warnings.size(), 1u);
  auto rootful = docker::ParseEngineInfo(R"({"SecurityOptions":["seccomp","apparmor"]})");
  ASSERT_TRUE(rootful.ok());
  EXPECT_FALSE(rootful->rootless);
  EXPECT_EQ(rootful->security_options, (std::vector<std::string>{"seccomp", "apparmor"}));
  EXPECT_FALSE(docker::ParseEngineInfo("[]").ok());
}

TEST(ImageImportTest, TheQueryCarriesTheNameAndTheChanges) {
  EXPECT_EQ(docker::ImportPath("code-interpreter-executor:latest",
                               {"WORKDIR /workspace", "ENV LANG=C.UTF-8"}),
            "/images/create?fromSrc=-&repo=code-interpreter-executor&tag=latest"
            "&changes=WORKDIR%20%2Fworkspace&changes=ENV%20LANG%3DC.UTF-8");
  EXPECT_EQ(docker::ImportPath("registry:5000/x", {}),
            "/images/create?fromSrc=-&repo=registry%3A5000%2Fx&tag=latest");
}

class CgroupNestingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("cgroup-nesting-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(root_ / name) << text;
  }
  std::string Read(const std::string& name) {
    std::ifstream in(root_ / name);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  fs::path root_;
};

TEST_F(CgroupNestingTest, V2MovesOurProcessesAndEnablesEveryController) {
  Write("cgroup.controllers", "cpuset cpu io memory pids\n");
  Write("cgroup.procs", "1\n7\n");
  Write("cgroup.subtree_control", "");
  Write("self", "0::/\n");
  auto n = EnableCgroupNesting(root_.string(), (root_ / "self").string());
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(n->version, "2");
  EXPECT_EQ(n->controllers, "cpuset cpu io memory pids");
  EXPECT_EQ(Read("cgroup.subtree_control"), "+cpuset +cpu +io +memory +pids");
  EXPECT_EQ(Read("init/cgroup.procs"), "7");  // one write per pid: the file keeps the last
}

TEST_F(CgroupNestingTest, V2WithTheHostsNamespaceNestsInTheContainersOwnCgroup) {
  // The root holds the host's processes: they stay where they are.
  Write("cgroup.controllers", "cpu memory pids\n");
  Write("cgroup.procs", "1\n");
  fs::create_directories(root_ / "system.slice/docker-1.scope");
  Write("system.slice/docker-1.scope/cgroup.controllers", "memory pids\n");
  Write("system.slice/docker-1.scope/cgroup.procs", "42\n");
  Write("self", "0::/system.slice/docker-1.scope\n");
  auto n = EnableCgroupNesting(root_.string(), (root_ / "self").string());
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(n->own_cgroup, "/system.slice/docker-1.scope");
  EXPECT_EQ(n->controllers, "memory pids");
  EXPECT_EQ(Read("system.slice/docker-1.scope/cgroup.subtree_control"), "+memory +pids");
  EXPECT_EQ(Read("system.slice/docker-1.scope/init/cgroup.procs"), "42");
  EXPECT_FALSE(fs::exists(root_ / "init"));
  EXPECT_EQ(Read("cgroup.procs"), "1\n");
}

TEST_F(CgroupNestingTest, V2InACgroupNamespaceOfOurOwnIsTheRoot) {
  Write("cgroup.controllers", "memory pids\n");
  Write("cgroup.procs", "1\n");
  Write("self", "0::/\n");
  auto n = EnableCgroupNesting(root_.string(), (root_ / "self").string());
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(n->own_cgroup, "/");
}

TEST_F(CgroupNestingTest, V1NeedsWritableHierarchies) {
  auto missing = EnableCgroupNesting(root_.string(), (root_ / "self").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("privileged"), std::string::npos);
  fs::create_directories(root_ / "memory");
  auto n = EnableCgroupNesting(root_.string(), (root_ / "self").string());
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->version, "1");
}

}  // namespace
}  // namespace ci::daemon
