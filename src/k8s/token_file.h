// A bearer token kept in a file that is replaced while the daemon runs: a projected
// service-account token rotates (the kubelet rewrites it at 80% of its ~1 h lifetime), and a
// kubeconfig's tokenFile may be refreshed by something else. Read again when the file changes,
// and at least every minute as client-go does (transport/token_source.go), so neither a coarse
// mtime nor a rewrite within the same second keeps an old token for long.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <ctime>
#include <functional>
#include <mutex>
#include <string>

#include "core/status.h"

namespace ci::k8s {

class TokenFile {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  static constexpr std::chrono::seconds kMaxAge{60};

  // `now` is injectable so tests can age the cached token without sleeping.
  explicit TokenFile(std::string path, Clock now = &std::chrono::steady_clock::now);

  // The token, whitespace trimmed. The file is stat'ed on every call and read again when its
  // identity (mtime, inode, size) differs from the last read, or when that read is kMaxAge old.
  // A failed re-read keeps the last good token (it is likely still valid; client-go does the
  // same); with no good token yet it is an error naming the file. Thread-safe.
  Result<std::string> Token();

  const std::string& path() const { return path_; }

 private:
  struct Identity {
    timespec mtime{};
    ino_t inode = 0;
    off_t size = -1;
    bool operator==(const Identity& o) const {
      return mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec &&
             inode == o.inode && size == o.size;
    }
  };
  Result<std::string> Read(Identity* seen) const;

  const std::string path_;
  const Clock now_;
  std::mutex mu_;
  std::string token_;  // "" until a read succeeded
  Identity identity_;
  std::chrono::steady_clock::time_point read_at_{};
};

}  // namespace ci::k8s
