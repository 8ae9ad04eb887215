// The hardening profiles of policies/, compiled into the binary so one file is enough to run.
#pragma once

#include <optional>
#include <string_view>

namespace ci {

// The JSON text of a policy by its file name without ".json": "seccomp-executor",
// "seccomp-executor-strict", "seccomp-dockerd", "dockerd-capabilities". nullopt for any other
// name.
std::optional<std::string_view> EmbeddedPolicy(std::string_view name);

}  // namespace ci
