#include "daemon/backends/seccomp_profile.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "core/policies.h"
#include "runtime/daemon/seccomp_profile.h"

namespace ci::daemon {
namespace {

Result<std::string> ProfileText(const std::string& choice) {
  if (choice == "default" || choice == "strict") {
    auto text =
        EmbeddedPolicy(choice == "default" ? "seccomp-executor" : "seccomp-executor-strict");
    if (!text) return Status::Error("the embedded profile is missing from this build");
    return std::string(*text);
  }
  std::ifstream in(choice, std::ios::binary);
  if (!in) return Status::Errno("cannot read " + choice, errno);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

Result<std::string> LoadSeccompProfile(const Config& config) {
  const std::string context = "SECCOMP_PROFILE='" + config.seccomp_profile + "'";
  Result<std::string> text = ProfileText(config.seccomp_profile);
  if (!text.ok()) return text.status().Context(context);
  std::vector<std::string> skipped;
  auto bpf = runtime::CompileSeccompProfile(*text, config.seccomp_log_denied, &skipped);
  if (!bpf.ok()) return bpf.status().Context(context);
  std::string names;
  for (const auto& n : skipped) names += (names.empty() ? "" : " ") + n;
  if (!names.empty()) spdlog::debug("seccomp: names this libseccomp does not know: {}", names);
  spdlog::info("seccomp: profile {} ({} BPF instructions){}", config.seccomp_profile,
               bpf->size() / 8,
               config.seccomp_log_denied ? ", SECCOMP_LOG_DENIED: denied calls are allowed and "
                                           "logged by the kernel audit"
                                         : "");
  return text;
}

}  // namespace ci::daemon
