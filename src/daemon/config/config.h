// Configuration from the environment: the onyx names and defaults (docs/api.md) plus our own.
// An invalid value is a startup error naming the variable, never a silent default.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/env_reader.h"
#include "core/status.h"
#include "daemon/egress/egress_policy.h"

namespace ci::daemon {

struct Config {
  std::string executor_backend = "local";
  std::string host = "0.0.0.0";
  uint16_t port = 8000;
  std::string log_level = "info";
  std::string log_format = "plain";
  // execution
  int64_t max_exec_timeout_ms = 60000;
  uint64_t max_output_bytes = 1000000;
  uint32_t cpu_time_limit_sec = 5;
  uint64_t memory_limit_mb = 256;
  uint32_t pids_limit = 64;
  uint32_t cpu_quota_percent = 0;  // 0: no CPU bandwidth cap
  // Sandboxes kept prepared per language; 0: that language's executions start cold. Python's hold
  // an interpreter already started, with warm_imports imported.
  uint32_t warm_pool_size = 2;  // python
  uint32_t warm_pool_size_bash = 1;
  uint32_t warm_pool_size_javascript = 1;
  uint32_t warm_pool_size_go = 1;
  std::vector<std::string> warm_imports;  // WARM_IMPORTS: modules a pooled interpreter imports
  // FORK_SERVER: local backend as root, host root: Python programs run in an interpreter forked
  // from one loaded once (with warm_imports) instead of starting their own.
  bool fork_server = true;
  // RECYCLE_SANDBOXES (local backend): an execution sandbox is put back by its init and serves
  // the same client's next execution of the same kind (src/runtime/README.md "Recycling").
  bool recycle_sandboxes = true;
  uint64_t workspace_size_mb = 100;
  uint64_t tmp_size_mb = 64;
  size_t max_workspace_files = 1000;
  std::string sandbox_rootfs = "host";
  std::string cgroup_root;
  // SANDBOX_ID_RANGE "FIRST-LAST": the host uids/gids root-mode sandboxes take one of each.
  uint32_t sandbox_id_first = 2147418112;
  uint32_t sandbox_id_count = 65536;
  bool strict_hardening = false;  // refuse to start when a hardening measure is downgraded
  std::string seccomp_profile = "default";  // default | strict | /absolute/path.json
  bool seccomp_log_denied = false;          // allow and audit-log what the profile denies
  // files
  std::string file_storage_dir = "/tmp/code-interpreter-files";
  uint64_t max_file_size_mb = 100;
  uint64_t file_storage_max_mb = 10240;  // the store's disk use, all files together
  uint64_t file_storage_per_key_mb = 0;  // one API key's files; 0: half of file_storage_max_mb
  uint64_t file_ttl_sec = 3600;
  // HTTP
  uint64_t max_request_body_mb = 16;
  uint32_t http_read_timeout_sec = 30;
  uint32_t http_idle_timeout_sec = 60;
  uint32_t max_connections = 0;  // 0: derived from RLIMIT_NOFILE (connection_limit.h)
  uint32_t shutdown_grace_sec = 10;
  // Browsers (http/browser_guard.h): ALLOWED_ORIGINS and ALLOWED_HOSTS, comma-separated.
  std::vector<std::string> allowed_origins;
  std::vector<std::string> allowed_hosts;
  // admission and health (onyx 0.4.7)
  uint32_t max_concurrent_executions = 16;
  // Executions one API key may run at once; 0: three quarters of max_concurrent_executions.
  uint32_t max_executions_per_key = 0;
  uint32_t execution_queue_timeout_sec = 30;
  uint32_t execution_retry_after_sec = 2;
  uint32_t capacity_retry_after_sec = 10;
  uint32_t max_sessions = 64;  // live sessions on this replica; more -> 503
  // Sessions one API key may hold (more -> 429); 0: half of max_sessions, at least 1.
  uint32_t max_sessions_per_key = 0;
  // Pause and snapshots (docs/sessions.md): how long a paused session is kept, idle times after
  // which a session is frozen and then snapshotted to disk (0: never), a snapshot's size bound,
  // and whether shutdown snapshots the sessions (local and docker) to resume them afterwards.
  uint64_t session_pause_ttl_sec = 86400;
  uint64_t session_idle_pause_sec = 0;
  uint64_t session_idle_snapshot_sec = 0;
  uint64_t snapshot_max_mb = 1024;
  bool snapshot_on_shutdown = true;
  uint32_t max_mcp_sessions = 1000;         // MCP sessions kept; more evict the least recent
  uint32_t max_mcp_sessions_per_key = 0;    // 0: half of max_mcp_sessions
  uint32_t max_concurrent_model_calls = 8;  // the agent loop's model requests in flight
  uint32_t max_model_calls_per_key = 0;     // 0: half of max_concurrent_model_calls
  uint32_t health_check_interval_sec = 30;
  double backend_check_timeout_sec = 2.5;
  // API keys (daemon/auth/api_keys.h): empty, none (anyone may call).
  std::string api_keys_file;
  bool metrics_require_api_key = false;  // /metrics with a key too (/health and /ready never)
  // Egress (docs/egress.md): a sandbox's policy when its request names none (EGRESS_ALLOW, with
  // EGRESS_DENY; no allow rule: no network), the bound of every policy (EGRESS_ALLOW_MAX, by
  // default EGRESS_ALLOW's rules), names pinned to addresses (EGRESS_HOSTS "name=addr,...").
  EgressPolicy egress_default;
  EgressPolicy egress_max;
  std::map<std::string, std::vector<boost::asio::ip::address>> egress_hosts;
  // Secrets the proxies add per destination (EGRESS_SECRETS_FILE, checked here, re-read when it
  // changes), the domains whose TLS they intercept to add them in tunnels (EGRESS_TLS_INTERCEPT),
  // CAs trusted for those upstream servers besides the system's (EGRESS_UPSTREAM_CA_FILE).
  std::string egress_secrets_file;
  std::vector<EgressRule> egress_tls_intercept;
  std::string egress_upstream_ca_file;
  // Per sandbox: connections through its proxy at once (EGRESS_MAX_CONNECTIONS) and its
  // bandwidth, both ways together (EGRESS_BANDWIDTH_KBPS, KiB/s; 0: unlimited).
  uint32_t egress_max_connections = 64;
  uint64_t egress_bandwidth_kbps = 0;
};

Result<Config> LoadConfig(const EnvLookup& getenv);

// "a, b,c" -> {"a", "b", "c"} (spaces around items dropped, empty items skipped).
std::vector<std::string> SplitCommaList(std::string_view text);

// EGRESS_HOSTS: "name=address" pairs, comma-separated (a name may appear more than once).
Result<std::map<std::string, std::vector<boost::asio::ip::address>>> ParseEgressHosts(
    std::string_view text);

// WARM_IMPORTS: comma-separated Python module names ("numpy, pandas"); empty: none.
Result<std::vector<std::string>> ParseWarmImports(std::string_view text);

}  // namespace ci::daemon
