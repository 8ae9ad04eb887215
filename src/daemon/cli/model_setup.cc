#include "daemon/cli/model_setup.h"

#include <fmt/format.h>
#include <string.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ci::daemon {
namespace {

// What a local sandbox on the host's root sees of the host: its read-only binds (rootfs.cc).
constexpr const char* kSandboxVisible[] = {"/usr",   "/bin",   "/sbin",  "/lib",
                                           "/lib32", "/lib64", "/libx32"};

bool Under(const std::filesystem::path& path, const std::filesystem::path& dir) {
  auto [d, p] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
  return d == dir.end();
}

Result<std::string> ReadKeyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Errno("cannot read " + path, errno);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A key file inside what a sandbox mounts would be readable by the programs the key pays for.
Status CheckKeyFilePlace(const std::string& path, const Config& config) {
  std::error_code ec;
  std::filesystem::path real = std::filesystem::canonical(path, ec);
  if (ec) return Status::Error("LLM_API_KEY_FILE: " + path + ": " + ec.message());
  std::vector<std::filesystem::path> visible(std::begin(kSandboxVisible),
                                             std::end(kSandboxVisible));
  if (config.sandbox_rootfs != "host") visible.emplace_back(config.sandbox_rootfs);
  for (const auto& dir : visible) {
    std::filesystem::path resolved = std::filesystem::weakly_canonical(dir, ec);
    if (!ec && Under(real, resolved)) {
      return Status::Error("LLM_API_KEY_FILE: " + real.string() + " is under " + resolved.string() +
                           ", which sandboxes can read: keep the key elsewhere (e.g. "
                           "/etc/code-interpreter/llm-api-key, mode 0600)");
    }
  }
  return Status();
}

// Zeroes the value where it lies (the process's initial environment block, read by
// /proc/PID/environ), then removes the variable.
void ForgetVariable(const char* name) {
  if (char* value = std::getenv(name)) ::explicit_bzero(value, ::strlen(value));
  ::unsetenv(name);
}

}  // namespace

Result<llm::LlmConfig> LoadModelConfig(const Config& config) {
  const char* key_file = std::getenv("LLM_API_KEY_FILE");
  if (key_file != nullptr && *key_file != '\0') {
    if (Status s = CheckKeyFilePlace(key_file, config); !s.ok()) return s;
  }
  auto loaded = llm::LoadLlmConfig([](const char* name) { return std::getenv(name); }, ReadKeyFile);
  ForgetVariable("LLM_API_KEY");
  return loaded;
}

std::string DescribeModel(const llm::LlmConfig& model) {
  const char* key_from = model.api_key.empty() ? "no key" : "with a key";
  return fmt::format("{} model {} at {} ({}, timeout {} s)", model.provider, model.model,
                     model.base_url, key_from, model.timeout.count());
}

}  // namespace ci::daemon
