// API keys (API_KEYS_FILE): who may call the API, by name. The file holds one `NAME KEY` per
// line (whitespace-separated; blank lines and `#` comments ignored), optionally followed by the
// key's own limits (`sessions=4 files_mb=200`, see KeyLimits); a request carries
// `Authorization: Bearer KEY` and is then the caller NAME, whose files and sessions are its own
// (docs/api.md "API keys"). The file is re-read when it changes (at most once a second), so
// keys are added and revoked without a restart: an edit that does not parse keeps the keys read
// before (logged), a file that is gone leaves no key (every request is refused). A presented key
// is compared in constant time: its SHA-256 against every key's, with no early exit. Keys are
// never logged; errors name the file and the line, logs the key's NAME.
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "daemon/egress/egress_policy.h"

namespace ci::daemon {

// What one key may hold at once, where its line in the file says (`NAME KEY executions=2`);
// nullopt: the replica's default share (daemon/auth/key_quotas.h). 0 forbids the resource.
struct KeyLimits {
  std::optional<uint32_t> sessions;      // live sessions
  std::optional<uint32_t> executions;    // executions running (one-off, tool and agent runs)
  std::optional<uint64_t> files_mb;      // file store use: uploads and output files
  std::optional<uint32_t> mcp_sessions;  // MCP sessions (at least 1: more evict its oldest)
  std::optional<uint32_t> model_calls;   // agent-loop model calls in flight
  // Its sandboxes' egress (`egress=pypi.org,*.pythonhosted.org`, `egress=none`): their policy
  // when a request names none, and the bound of those that do (docs/egress.md "Per key").
  std::optional<std::vector<EgressRule>> egress;
};

struct ApiKey {
  std::string name;
  std::array<unsigned char, 32> digest{};  // SHA-256 of the key
  KeyLimits limits;
};

// The file's text -> its keys. Errors name the line: a line without NAME and KEY, a NAME not of
// [A-Za-z0-9._-] (1-64), a KEY shorter than 16 characters or with characters a bearer token
// cannot have (RFC 6750 b64token), a NAME or KEY given twice, a limit not `name=number` of
// KeyLimits or given twice. Pure.
Result<std::vector<ApiKey>> ParseApiKeys(std::string_view text);

// Why a request is refused (the 401's detail), or whose it is.
struct Caller {
  std::string name;        // the key's NAME when accepted
  std::string error;       // empty when accepted
  bool wrong_key = false;  // a bearer token was given, and it is no key (RFC 6750 invalid_token)
  bool ok() const { return error.empty(); }
};

class ApiKeys {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // Reads `path` once: a file that does not parse stops startup. `clock` paces the re-reads
  // (tests pass their own).
  static Result<std::unique_ptr<ApiKeys>> Open(std::string path,
                                               Clock clock = std::chrono::steady_clock::now);

  // `authorization` is the request's Authorization header (nullopt: none).
  Caller Authenticate(std::optional<std::string_view> authorization);
  // The key itself, as E2B's X-API-KEY header carries it (nullopt: none); errors name `header`.
  Caller AuthenticateKey(std::optional<std::string_view> key, std::string_view header);
  size_t count() const { return keys_.size(); }
  // Called with the keys now and after every re-read that changed them (the limits follow).
  void OnLoad(std::function<void(const std::vector<ApiKey>&)> listener);

 private:
  ApiKeys(std::string path, Clock clock) : path_(std::move(path)), clock_(std::move(clock)) {}
  void ReloadIfChanged();
  // The key `v` (surrounding spaces ignored) compared with every key in constant time.
  Caller Match(std::string_view v) const;

  std::string path_;
  Clock clock_;
  std::vector<ApiKey> keys_;
  std::function<void(const std::vector<ApiKey>&)> on_load_;
  // What was last read: reloaded when any of it changes.
  struct FileId {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = -1;
    timespec mtime{};
    bool operator==(const FileId& o) const;
  };
  std::optional<FileId> read_;
  std::chrono::steady_clock::time_point checked_;
};

}  // namespace ci::daemon
