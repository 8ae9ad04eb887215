#include "daemon/config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>
#include <vector>

namespace ci {
namespace {

// Reads one variable at a time and remembers the first error, so LoadConfig reads like a table.
class EnvReader {
 public:
  explicit EnvReader(const EnvLookup& getenv) : getenv_(getenv) {}

  template <typename T>
  void Int(const char* name, T& out, int64_t min, int64_t max) {
    const char* raw = getenv_(name);
    if (raw == nullptr || !error_.ok()) return;
    std::string_view s(raw);
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(raw, &end, 10);
    if (s.empty() || *end != '\0' || errno == ERANGE || v < min || v > max) {
      Fail(name, raw, "an integer from " + std::to_string(min) + " to " + std::to_string(max));
      return;
    }
    out = static_cast<T>(v);
  }

  void Double(const char* name, double& out, double min, double max) {
    const char* raw = getenv_(name);
    if (raw == nullptr || !error_.ok()) return;
    char* end = nullptr;
    double v = std::strtod(raw, &end);
    if (*raw == '\0' || *end != '\0' || !std::isfinite(v) || v < min || v > max) {
      Fail(name, raw, "a number from " + Trim(min) + " to " + Trim(max));
      return;
    }
    out = v;
  }

  void String(const char* name, std::string& out, bool allow_empty = false) {
    const char* raw = getenv_(name);
    if (raw == nullptr || !error_.ok()) return;
    if (!allow_empty && *raw == '\0') {
      Fail(name, raw, "a non-empty value");
      return;
    }
    out = raw;
  }

  void Bool(const char* name, bool& out) {
    std::string v = out ? "true" : "false";
    Choice(name, v, {"true", "false", "1", "0", "yes", "no"});
    out = v == "true" || v == "1" || v == "yes";
  }

  // Case-insensitive choice; stores the lower-case form.
  void Choice(const char* name, std::string& out, const std::vector<std::string>& choices) {
    const char* raw = getenv_(name);
    if (raw == nullptr || !error_.ok()) return;
    std::string v(raw);
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
    if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
      std::string list;
      for (const auto& c : choices) list += (list.empty() ? "" : "|") + c;
      Fail(name, raw, "one of " + list);
      return;
    }
    out = v;
  }

  // "FIRST-LAST", inclusive, within [min, max].
  void Range(const char* name, uint32_t& first, uint32_t& count, int64_t min, int64_t max) {
    const char* raw = getenv_(name);
    if (raw == nullptr || !error_.ok()) return;
    char* end = nullptr;
    errno = 0;
    long long a = std::strtoll(raw, &end, 10);
    long long b = *end == '-' ? std::strtoll(end + 1, &end, 10) : -1;
    if (*raw == '\0' || *end != '\0' || errno == ERANGE || a < min || b > max || b < a) {
      Fail(
          name, raw,
          "FIRST-LAST with " + std::to_string(min) + " <= FIRST <= LAST <= " + std::to_string(max));
      return;
    }
    first = static_cast<uint32_t>(a);
    count = static_cast<uint32_t>(b - a + 1);
  }
  const Status& error() const { return error_; }

 private:
  static std::string Trim(double v) {
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  void Fail(const char* name, const char* raw, const std::string& expected) {
    error_ = Status::Error(std::string("invalid environment variable ") + name + "='" + raw +
                           "': expected " + expected);
  }

  const EnvLookup& getenv_;
  Status error_;
};

}  // namespace

Result<Config> LoadConfig(const EnvLookup& getenv) {
  Config c;
  EnvReader env(getenv);
  constexpr int64_t kMaxU32 = std::numeric_limits<uint32_t>::max();
  env.Choice("EXECUTOR_BACKEND", c.executor_backend, {"local", "docker", "kubernetes"});
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
  env.Int("FILE_TTL_SEC", c.file_ttl_sec, 1, kMaxU32);
  env.Int("MAX_REQUEST_BODY_MB", c.max_request_body_mb, 1, 4096);
  env.Int("HTTP_READ_TIMEOUT_SEC", c.http_read_timeout_sec, 1, 3600);
  env.Int("HTTP_IDLE_TIMEOUT_SEC", c.http_idle_timeout_sec, 1, 3600);
  env.Int("SHUTDOWN_GRACE_SEC", c.shutdown_grace_sec, 0, 3600);
  env.Int("MAX_CONCURRENT_EXECUTIONS", c.max_concurrent_executions, 1, 100000);
  env.Int("EXECUTION_QUEUE_TIMEOUT_SEC", c.execution_queue_timeout_sec, 0, 3600);
  env.Int("EXECUTION_RETRY_AFTER_SEC", c.execution_retry_after_sec, 0, 3600);
  env.Int("CAPACITY_RETRY_AFTER_SEC", c.capacity_retry_after_sec, 0, 3600);
  env.Int("MAX_SESSIONS", c.max_sessions, 1, 100000);
  env.Int("HEALTH_CHECK_INTERVAL_SEC", c.health_check_interval_sec, 1, 86400);
  env.Double("BACKEND_CHECK_TIMEOUT_SEC", c.backend_check_timeout_sec, 0.1, 600);
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
  if (c.log_level == "warning") c.log_level = "warn";
  return c;
}

}  // namespace ci
