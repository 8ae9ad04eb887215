#include "daemon/auth/key_quotas.h"

#include <algorithm>
#include <cstdint>

namespace ci::daemon {
namespace {

// The configured share, else `fallback`; at least 1, at most `whole`.
template <typename T>
T Share(T configured, T whole, T fallback) {
  return std::clamp<T>(configured != 0 ? configured : fallback, 1, whole);
}

}  // namespace

KeyQuotas::KeyQuotas(const Config& c) {
  whole_ = Quota{c.max_sessions,     c.max_concurrent_executions,  UINT64_MAX,
                 c.max_mcp_sessions, c.max_concurrent_model_calls, std::nullopt};
  const uint32_t executions = c.max_concurrent_executions;
  defaults_ = Quota{
      Share(c.max_sessions_per_key, c.max_sessions, c.max_sessions / 2),
      Share(c.max_executions_per_key, executions, executions - executions / 4),
      Share<uint64_t>(c.file_storage_per_key_mb, c.file_storage_max_mb, c.file_storage_max_mb / 2)
          << 20,
      Share(c.max_mcp_sessions_per_key, c.max_mcp_sessions, c.max_mcp_sessions / 2),
      Share(c.max_model_calls_per_key, c.max_concurrent_model_calls,
            c.max_concurrent_model_calls / 2),
      std::nullopt,
  };
}

void KeyQuotas::Set(const std::vector<ApiKey>& keys) {
  std::map<std::string, KeyLimits, std::less<>> limits;
  for (const ApiKey& k : keys) limits.emplace(k.name, k.limits);
  std::lock_guard lock(mu_);
  limits_ = std::move(limits);
}

Quota KeyQuotas::For(const std::string& client) const {
  if (client.empty()) return whole_;
  Quota q = defaults_;
  std::lock_guard lock(mu_);
  auto it = limits_.find(client);
  if (it == limits_.end()) return q;
  // A key's own limit may be below the default or above it, never above the replica's.
  const KeyLimits& l = it->second;
  if (l.sessions) q.sessions = std::min(*l.sessions, whole_.sessions);
  if (l.executions) q.executions = std::min(*l.executions, whole_.executions);
  if (l.files_mb) q.file_bytes = *l.files_mb << 20;
  if (l.mcp_sessions) q.mcp_sessions = std::min(*l.mcp_sessions, whole_.mcp_sessions);
  if (l.model_calls) q.model_calls = std::min(*l.model_calls, whole_.model_calls);
  q.egress = l.egress;
  return q;
}

}  // namespace ci::daemon
