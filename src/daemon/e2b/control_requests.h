// The E2B control plane's request bodies and list query (docs/e2b.md), parsed strictly: every
// field's type and range checked, the options this server cannot honour refused by name. Pure.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ci::daemon::e2b {

// The longest a sandbox may live, and its timeout when the request names none (E2B's default).
inline constexpr int64_t kMaxTimeoutSec = 86400;
inline constexpr int64_t kDefaultTimeoutSec = 300;

// The templates this server runs (one image serves both).
inline constexpr std::string_view kTemplates[] = {"base", "code-interpreter-v1"};

// POST /sandboxes and /v2/sandboxes (NewSandbox, NewSandboxV2).
// E2B's egress options (`allow_internet_access`, `network.allowOut`/`denyOut`; docs/egress.md
// "Sessions and E2B" maps them onto this server's policies).
struct NetworkOptions {
  std::optional<bool> allow_internet_access;
  std::optional<std::vector<std::string>> allow_out, deny_out;
};

struct NewSandbox {
  std::string template_id;  // one of kTemplates, or a snapshot's id or name (the caller checks)
  int64_t timeout_sec = kDefaultTimeoutSec;
  std::map<std::string, std::string> metadata;
  std::map<std::string, std::string> env_vars;
  NetworkOptions network;
};
Result<NewSandbox> ParseNewSandbox(std::string_view body);

// PUT /sandboxes/{id}/network (updateNetwork).
Result<NetworkOptions> ParseNetworkUpdate(std::string_view body);

// {"timeout": seconds} of POST .../timeout (required) and .../connect (optional: nullopt).
Result<std::optional<int64_t>> ParseTimeout(std::string_view body, bool required);

// GET /v2/sandboxes (and the v1 GET /sandboxes) query.
struct ListQuery {
  std::map<std::string, std::string> metadata;  // every pair must match
  bool running = true;                          // state includes "running" (the default)
  bool paused = true;                           // and "paused" (the default too)
  size_t limit = 100;
  std::string next_token;  // "" for the first page
};
Result<ListQuery> ParseListQuery(std::string_view target);

}  // namespace ci::daemon::e2b
