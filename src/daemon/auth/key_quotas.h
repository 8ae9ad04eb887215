// How much of the replica one API key may hold at once (issue #30 item 6): its own limits from
// API_KEYS_FILE where its line gives them, else the defaults of the configuration, which keep
// any one key from taking everything. Without keys (client "") there is one client: it may take
// the whole replica. Thread-safe: the file store asks from the executor's threads.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "daemon/auth/api_keys.h"
#include "daemon/config/config.h"

namespace ci::daemon {

struct Quota {
  uint32_t sessions = 0;
  uint32_t executions = 0;
  uint64_t file_bytes = 0;  // UINT64_MAX: no share of its own (the store's quota only)
  uint32_t mcp_sessions = 0;
  uint32_t model_calls = 0;
  std::optional<std::vector<EgressRule>> egress;  // the key's own (KeyLimits); none: the daemon's
};

class KeyQuotas {
 public:
  explicit KeyQuotas(const Config& config);
  // The keys' own limits (ApiKeys::OnLoad): what a key's line does not give is the default.
  void Set(const std::vector<ApiKey>& keys);
  // The share of `client` (a key's name; a key no longer in the file gets the defaults).
  Quota For(const std::string& client) const;

 private:
  Quota whole_;     // the replica's own limits: the one client without keys
  Quota defaults_;  // a key's share when its line does not say
  mutable std::mutex mu_;
  std::map<std::string, KeyLimits, std::less<>> limits_;  // under mu_
};

}  // namespace ci::daemon
