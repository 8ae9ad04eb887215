#include "daemon/bootstrap/dind_image.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "docker/engine_client.h"
#include "docker/image_import.h"

namespace ci::daemon {
namespace {

using namespace std::chrono_literals;

// The Dockerfile instructions the image was built with, one per line next to the tarball
// (packaging/image/build.sh writes them), so the import gives the same image as `docker import`.
std::vector<std::string> ImportChanges(const std::string& tarball) {
  std::vector<std::string> changes;
  std::ifstream in(tarball + ".changes");
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') changes.push_back(line);
  }
  return changes;
}

// The executor root's key, as the image build labels it: "LABEL code-interpreter.root-key=K".
constexpr std::string_view kRootKeyChange = "LABEL code-interpreter.root-key=";

std::string RootKeyOf(const std::vector<std::string>& changes) {
  for (const std::string& c : changes) {
    if (c.rfind(kRootKeyChange, 0) == 0) return c.substr(kRootKeyChange.size());
  }
  return "";
}

// The label of an image inspect's body ("" when absent).
std::string RootKeyLabel(const std::string& inspect_json) {
  rapidjson::Document doc;
  std::string why;
  if (!ParseJson(inspect_json, doc, why) || !doc.IsObject()) return "";
  auto config = doc.FindMember("Config");
  if (config == doc.MemberEnd() || !config->value.IsObject()) return "";
  auto labels = config->value.FindMember("Labels");
  if (labels == config->value.MemberEnd() || !labels->value.IsObject()) return "";
  auto key = labels->value.FindMember("code-interpreter.root-key");
  if (key == labels->value.MemberEnd() || !key->value.IsString()) return "";
  return key->value.GetString();
}

}  // namespace

asio::awaitable<Status> EnsureExecutorImage(asio::any_io_executor ex, const std::string& socket,
                                            const std::string& image, const std::string& tarball) {
  docker::Endpoint ep;
  ep.socket_path = socket;
  docker::EngineClient client(ex, ep, 10s);
  if (Status s = co_await client.Negotiate(); !s.ok()) co_return s;
  std::string path = "/images/" + image + "/json";
  auto r = co_await client.Request("GET", path);
  if (!r.ok()) co_return r.status();
  std::vector<std::string> changes = ImportChanges(tarball);
  const std::string wanted = RootKeyOf(changes);
  if (r->ok()) {
    // Kept in the data root volume from an earlier start: current unless the image now carries
    // another executor root.
    const std::string have = RootKeyLabel(r->body);
    if (wanted.empty() || have == wanted) co_return Status();
    spdlog::info(
        "the nested dockerd's executor image has root {}, this image ships {}: "
        "importing it again",
        have.empty() ? "(unlabelled)" : have, wanted);
  }
  if (::access(tarball.c_str(), R_OK) != 0) {
    spdlog::warn(
        "executor image {} is missing in the nested dockerd and {} is not readable: "
        "executions fail until it is loaded (DIND_EXECUTOR_IMAGE_TAR)",
        image, tarball);
    co_return Status();
  }
  spdlog::info("importing the executor image {} into the nested dockerd from {}", image, tarball);
  auto started = std::chrono::steady_clock::now();
  Status s = co_await docker::ImportImage(client, tarball, image, changes, 30min);
  if (!s.ok()) co_return s;
  spdlog::info(
      "executor image {} imported in {} s", image,
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started)
          .count());
  co_return Status();
}

}  // namespace ci::daemon
