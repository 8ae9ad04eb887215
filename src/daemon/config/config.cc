#include "daemon/config/config.h"

#include <algorithm>
#include <limits>

#include "core/env_reader.h"
#include "daemon/egress/egress_interception.h"
#include "daemon/egress/egress_secrets.h"

namespace ci::daemon {

namespace {

bool IsModuleName(std::string_view name) {
  bool start = true;  // at the start of a dotted part
  for (char ch : name) {
    const bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
    const bool digit = ch >= '0' && ch <= '9';
    if (ch == '.' && !start) {
      start = true;
    } else if (alpha || (digit && !start)) {
      start = false;
    } else {
      return false;
    }
  }
  return !start;
}

}  // namespace

std::vector<std::string> SplitCommaList(std::string_view text) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos <= text.size();) {
    size_t comma = std::min(text.find(',', pos), text.size());
    std::string_view part = text.substr(pos, comma - pos);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    if (!part.empty()) out.emplace_back(part);
    pos = comma + 1;
  }
  return out;
}

Result<std::map<std::string, std::vector<boost::asio::ip::address>>> ParseEgressHosts(
    std::string_view text) {
  std::map<std::string, std::vector<boost::asio::ip::address>> out;
  for (const std::string& pair : SplitCommaList(text)) {
    const size_t eq = pair.find('=');
    boost::system::error_code ec;
    auto address = boost::asio::ip::make_address(
        eq == std::string::npos ? std::string() : pair.substr(eq + 1), ec);
    auto name = ParseEgressRule(pair.substr(0, eq));
    if (eq == std::string::npos || ec || !name.ok() || name->kind != EgressRule::Kind::kDomain ||
        name->port) {
      return Status::Error("invalid environment variable EGRESS_HOSTS: '" + pair +
                           "' is not name=address (e.g. pypi.test=10.0.0.5)");
    }
    out[name->domain].push_back(address);
  }
  return out;
}

Result<std::vector<std::string>> ParseWarmImports(std::string_view text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  for (size_t pos = 0; pos <= text.size();) {
    size_t comma = std::min(text.find(',', pos), text.size());
    std::string_view part = text.substr(pos, comma - pos);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    if (!IsModuleName(part)) {
      return Status::Error("invalid environment variable WARM_IMPORTS='" + std::string(text) +
                           "': '" + std::string(part) +
                           "' is not a module name (expected e.g. numpy,pandas,matplotlib.pyplot)");
    }
    out.emplace_back(part);
    pos = comma + 1;
  }
  return out;
}

namespace {

// EGRESS_SECRETS_FILE (read and parsed now: errors name the line, never a value),
// EGRESS_TLS_INTERCEPT (domains and wildcards) and EGRESS_UPSTREAM_CA_FILE (a PEM file).
Status CheckEgressSecretsSettings(Config& c, std::string_view intercept) {
  if (!c.egress_secrets_file.empty()) {
    auto secrets = EgressSecrets::Open(c.egress_secrets_file);
    if (!secrets.ok()) {
      return Status::Error("invalid environment variable EGRESS_SECRETS_FILE: " +
                           secrets.status().message());
    }
  }
  auto rules = ParseEgressRules(intercept, "invalid environment variable EGRESS_TLS_INTERCEPT");
  if (!rules.ok()) return rules.status();
  for (const EgressRule& r : rules.value()) {
    if (r.kind == EgressRule::Kind::kCidr) {
      return Status::Error("invalid environment variable EGRESS_TLS_INTERCEPT: '" + r.ToString() +
                           "': interception is for domains and *.wildcards, not addresses");
    }
  }
  c.egress_tls_intercept = std::move(rules).value();
  if (!c.egress_upstream_ca_file.empty()) {
    if (Status s = CheckCaFile(c.egress_upstream_ca_file); !s.ok()) {
      return Status::Error("invalid environment variable EGRESS_UPSTREAM_CA_FILE: " + s.message());
    }
  }
  return Status();
}

}  // namespace

Result<Config> LoadConfig(const EnvLookup& getenv) {
  Config c;
  EnvReader env(getenv);
  constexpr int64_t kMaxU32 = std::numeric_limits<uint32_t>::max();
  env.Choice("EXECUTOR_BACKEND", c.executor_backend, {"local", "docker", "kubernetes", "auto"});
  env.String("HOST", c.host);
  env.Int("PORT", c.port, 0, 65535);
  env.Choice("LOG_LEVEL", c.log_level, {"trace", "debug", "info", "warning", "error", "critical"});
  env.Choice("LOG_FORMAT", c.log_format, {"plain", "json"});
  env.Int("MAX_EXEC_TIMEOUT_MS", c.max_exec_timeout_ms, 1, 24ll * 3600 * 1000);
  env.Int("MAX_OUTPUT_BYTES", c.max_output_bytes, 64, 1ll << 30);
  env.Int("CPU_TIME_LIMIT_SEC", c.cpu_time_limit_sec, 1, 86400);
  env.Int("MEMORY_LIMIT_MB", c.memory_limit_mb, 16, 1 << 20);
  env.Int("PIDS_LIMIT", c.pids_limit, 4, 1 << 20);
  env.Int("CPU_QUOTA_PERCENT", c.cpu_quota_percent, 0, 100 * 1024);
  env.Int("WARM_POOL_SIZE", c.warm_pool_size, 0, 256);
  env.Int("WARM_POOL_SIZE_BASH", c.warm_pool_size_bash, 0, 256);
  env.Int("WARM_POOL_SIZE_JAVASCRIPT", c.warm_pool_size_javascript, 0, 256);
  env.Int("WARM_POOL_SIZE_GO", c.warm_pool_size_go, 0, 256);
  env.Bool("FORK_SERVER", c.fork_server);
  env.Bool("RECYCLE_SANDBOXES", c.recycle_sandboxes);
  std::string warm_imports;
  env.String("WARM_IMPORTS", warm_imports, /*allow_empty=*/true);
  env.Int("WORKSPACE_SIZE_MB", c.workspace_size_mb, 1, 1 << 20);
  env.Int("TMP_SIZE_MB", c.tmp_size_mb, 1, 1 << 20);
  env.Int("MAX_WORKSPACE_FILES", c.max_workspace_files, 0, 1 << 20);
  env.String("SANDBOX_ROOTFS", c.sandbox_rootfs);
  env.String("CGROUP_ROOT", c.cgroup_root, /*allow_empty=*/true);
  // Above every id a distribution gives users, and below (uid_t)-1 and the overflow ids.
  env.Range("SANDBOX_ID_RANGE", c.sandbox_id_first, c.sandbox_id_count, 65536, 4294967294ll);
  env.Bool("STRICT_HARDENING", c.strict_hardening);
  env.String("SECCOMP_PROFILE", c.seccomp_profile);
  env.Bool("SECCOMP_LOG_DENIED", c.seccomp_log_denied);
  env.String("FILE_STORAGE_DIR", c.file_storage_dir);
  env.Int("MAX_FILE_SIZE_MB", c.max_file_size_mb, 1, 1 << 20);
  env.Int("FILE_STORAGE_MAX_MB", c.file_storage_max_mb, 1, 1ll << 30);
  env.Int("FILE_STORAGE_PER_KEY_MB", c.file_storage_per_key_mb, 0, 1ll << 30);
  env.Int("FILE_TTL_SEC", c.file_ttl_sec, 1, kMaxU32);
  env.Int("MAX_REQUEST_BODY_MB", c.max_request_body_mb, 1, 4096);
  env.Int("HTTP_READ_TIMEOUT_SEC", c.http_read_timeout_sec, 1, 3600);
  env.Int("HTTP_IDLE_TIMEOUT_SEC", c.http_idle_timeout_sec, 1, 3600);
  env.Int("MAX_CONNECTIONS", c.max_connections, 0, 1000000);
  env.Int("SHUTDOWN_GRACE_SEC", c.shutdown_grace_sec, 0, 3600);
  std::string allowed_origins, allowed_hosts;
  env.String("ALLOWED_ORIGINS", allowed_origins, /*allow_empty=*/true);
  env.String("ALLOWED_HOSTS", allowed_hosts, /*allow_empty=*/true);
  c.allowed_origins = SplitCommaList(allowed_origins);
  c.allowed_hosts = SplitCommaList(allowed_hosts);
  env.Int("MAX_CONCURRENT_EXECUTIONS", c.max_concurrent_executions, 1, 100000);
  env.Int("MAX_EXECUTIONS_PER_KEY", c.max_executions_per_key, 0, 100000);
  env.Int("EXECUTION_QUEUE_TIMEOUT_SEC", c.execution_queue_timeout_sec, 0, 3600);
  env.Int("EXECUTION_RETRY_AFTER_SEC", c.execution_retry_after_sec, 0, 3600);
  env.Int("CAPACITY_RETRY_AFTER_SEC", c.capacity_retry_after_sec, 0, 3600);
  env.Int("MAX_SESSIONS", c.max_sessions, 1, 100000);
  env.Int("MAX_SESSIONS_PER_KEY", c.max_sessions_per_key, 0, 100000);
  env.Int("SESSION_PAUSE_TTL_SEC", c.session_pause_ttl_sec, 1, 365ull * 86400);
  env.Int("SESSION_IDLE_PAUSE_SEC", c.session_idle_pause_sec, 0, 365ull * 86400);
  env.Int("SESSION_IDLE_SNAPSHOT_SEC", c.session_idle_snapshot_sec, 0, 365ull * 86400);
  env.Int("SNAPSHOT_MAX_MB", c.snapshot_max_mb, 1, 1ull << 20);
  env.Bool("SNAPSHOT_ON_SHUTDOWN", c.snapshot_on_shutdown);
  env.Int("MAX_MCP_SESSIONS", c.max_mcp_sessions, 1, 1000000);
  env.Int("MAX_MCP_SESSIONS_PER_KEY", c.max_mcp_sessions_per_key, 0, 1000000);
  env.Int("MAX_CONCURRENT_MODEL_CALLS", c.max_concurrent_model_calls, 1, 10000);
  env.Int("MAX_MODEL_CALLS_PER_KEY", c.max_model_calls_per_key, 0, 10000);
  env.Int("HEALTH_CHECK_INTERVAL_SEC", c.health_check_interval_sec, 1, 86400);
  env.Double("BACKEND_CHECK_TIMEOUT_SEC", c.backend_check_timeout_sec, 0.1, 600);
  env.String("API_KEYS_FILE", c.api_keys_file, /*allow_empty=*/true);
  env.Bool("METRICS_REQUIRE_API_KEY", c.metrics_require_api_key);
  if (!env.error().ok()) return env.error();
  if (c.sandbox_rootfs != "host" && c.sandbox_rootfs.front() != '/') {
    return Status::Error("invalid environment variable SANDBOX_ROOTFS='" + c.sandbox_rootfs +
                         "': expected 'host' or an absolute directory path");
  }
  if (c.seccomp_profile != "default" && c.seccomp_profile != "strict" &&
      c.seccomp_profile.front() != '/') {
    return Status::Error("invalid environment variable SECCOMP_PROFILE='" + c.seccomp_profile +
                         "': expected 'default', 'strict' or an absolute path to a JSON profile");
  }
  std::string egress_allow, egress_deny, egress_max, egress_hosts;
  env.String("EGRESS_ALLOW", egress_allow, /*allow_empty=*/true);
  env.String("EGRESS_DENY", egress_deny, /*allow_empty=*/true);
  env.String("EGRESS_ALLOW_MAX", egress_max, /*allow_empty=*/true);
  env.String("EGRESS_HOSTS", egress_hosts, /*allow_empty=*/true);
  auto allow = ParseEgressRules(egress_allow, "invalid environment variable EGRESS_ALLOW");
  if (!allow.ok()) return allow.status();
  auto deny = ParseEgressRules(egress_deny, "invalid environment variable EGRESS_DENY");
  if (!deny.ok()) return deny.status();
  auto max = ParseEgressRules(egress_max.empty() ? egress_allow : egress_max,
                              "invalid environment variable EGRESS_ALLOW_MAX");
  if (!max.ok()) return max.status();
  c.egress_max = {std::move(max).value(), deny.value()};
  auto narrowed = Narrow(EgressPolicy{std::move(allow).value(), {}}, c.egress_max);
  if (!narrowed.ok()) {
    return Status::Error("invalid environment variable EGRESS_ALLOW: " +
                         narrowed.status().message());
  }
  c.egress_default = std::move(narrowed).value();
  auto hosts = ParseEgressHosts(egress_hosts);
  if (!hosts.ok()) return hosts.status();
  c.egress_hosts = std::move(hosts).value();
  std::string intercept;
  env.String("EGRESS_SECRETS_FILE", c.egress_secrets_file, /*allow_empty=*/true);
  env.String("EGRESS_TLS_INTERCEPT", intercept, /*allow_empty=*/true);
  env.String("EGRESS_UPSTREAM_CA_FILE", c.egress_upstream_ca_file, /*allow_empty=*/true);
  if (Status s = CheckEgressSecretsSettings(c, intercept); !s.ok()) return s;
  env.Int("EGRESS_MAX_CONNECTIONS", c.egress_max_connections, 1, 4096);
  env.Int("EGRESS_BANDWIDTH_KBPS", c.egress_bandwidth_kbps, 0, uint64_t{1} << 30);
  auto modules = ParseWarmImports(warm_imports);
  if (!modules.ok()) return modules.status();
  c.warm_imports = std::move(modules).value();
  if (c.log_level == "warning") c.log_level = "warn";
  return c;
}

}  // namespace ci::daemon
