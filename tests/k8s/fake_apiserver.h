// Starts tests/k8s/fake_apiserver.py for one C++ test (the path is CI_K8S_FAKE_APISERVER, set by
// tests/k8s/meson.build) in a temp state directory, and stops it (SIGTERM: it kills its pods) at
// the end. Its images carry the agent built here (CI_AGENT_BINARY) at kFakeImageAgent. Needs
// root, as the fake's pods do.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "k8s/api_client.h"
#include "k8s/kube_config.h"

namespace ci::testing_support {

// Where the fake's images carry the agent: outside the host's /usr that they are made of (the
// executor image's own path is under it), so a pod made for the fake names this path
// (K8sOptions::agent_path, KUBERNETES_EXECUTOR_AGENT_PATH).
inline constexpr const char* kFakeImageAgent = "/code-interpreter/agent";

// The fake, started for one test; its first stdout line says where it listens.
class FakeApiServer {
 public:
  explicit FakeApiServer(std::vector<std::string> extra = {}) {
    dir_ = std::filesystem::temp_directory_path() / ("fake-apiserver-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    int out[2];
    if (pipe(out) != 0) std::abort();
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      close(out[0]);
      const std::string agent = std::string(kFakeImageAgent) + "=" + CI_AGENT_BINARY;
      std::vector<std::string> args = {"python3",     CI_K8S_FAKE_APISERVER, "--port",
                                       "0",           "--image-file",        agent,
                                       "--state-dir", dir_.string()};
      args.insert(args.end(), extra.begin(), extra.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp("python3", argv.data());
      _exit(127);
    }
    close(out[1]);
    std::string line;
    char c;
    while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
    close(out[0]);
    rapidjson::Document d;
    std::string why;
    if (!ParseJson(line, d, why) || !d.IsObject() || !d.HasMember("kubeconfig")) {
      ADD_FAILURE() << "the fake API server did not start: '" << line << "'";
      return;
    }
    kubeconfig_ = d["kubeconfig"].GetString();
    token_ = d["token"].GetString();
  }
  ~FakeApiServer() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& kubeconfig() const { return kubeconfig_; }
  const std::string& token() const { return token_; }
  const std::filesystem::path& dir() const { return dir_; }

  // A client of this server from its kubeconfig (its CA and token), with a 10 s call timeout.
  std::unique_ptr<k8s::ApiClient> Client(boost::asio::any_io_executor ex) const {
    auto config = k8s::LoadKubeconfig(kubeconfig_);
    EXPECT_TRUE(config.ok()) << config.status().message();
    return std::make_unique<k8s::ApiClient>(std::move(ex), std::move(config).value(),
                                            std::chrono::seconds(10));
  }

 private:
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  std::string kubeconfig_, token_;
};

}  // namespace ci::testing_support
