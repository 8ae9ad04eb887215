// Secrets the egress proxy adds to requests on their way out (docs/egress.md "Secrets"), so the
// program in the sandbox never holds them. The operator's file has one per line,
// "<destination> <Header-Name>: <value>", the destination a domain or "*.wildcard" with an
// optional ":port"; '#' comments and blank lines are skipped. Values never reach a log line, an
// error message or a report: errors name the line only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "daemon/egress/egress_policy.h"

namespace ci::daemon {

struct EgressSecret {
  EgressRule destination;  // a domain or a wildcard, with an optional port
  std::string header;      // as the file writes it
  std::string value;
};

// Shorter values are refused: each is masked wherever it appears in what comes back.
inline constexpr size_t kMinSecretLength = 8;

// The secrets in a file's text, or the first bad line's number and what is wrong with it (never
// its value). `what` names the file in errors.
Result<std::vector<EgressSecret>> ParseEgressSecrets(std::string_view text, std::string_view what);

// The operator's secrets file, read at startup and again when it changes (its inode, size or
// modification time, looked at once per lookup). A change that does not read or parse keeps the
// last good secrets, with a warning naming the line.
class EgressSecrets {
 public:
  static Result<std::shared_ptr<EgressSecrets>> Open(std::string path);
  // Built from secrets already parsed (tests, other sources); never re-read.
  explicit EgressSecrets(std::vector<EgressSecret> secrets);

  // The headers to set for a destination: every line whose rule matches it, the first line for
  // a header name (compared without case) winning.
  std::vector<EgressSecret> For(std::string_view host, uint16_t port);
  const std::string& path() const { return path_; }

 private:
  struct FileId {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = -1;
    int64_t mtime_ns = 0;
    bool operator==(const FileId&) const = default;
  };
  EgressSecrets(std::string path, std::vector<EgressSecret> secrets, FileId id);
  void ReloadIfChanged();

  std::string path_;  // empty: never re-read
  std::mutex mu_;     // proxies on several threads share one holder
  std::vector<EgressSecret> secrets_;
  FileId id_;  // of the last version read, good or not
};

}  // namespace ci::daemon
