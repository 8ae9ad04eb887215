// The nested dockerd of Docker-in-Docker, started and supervised by the daemon itself (no shell
// entrypoint): its configuration written, its process hardened (dockerd_hardening.h), its log
// forwarded line by line with a "dockerd:" prefix, a crash restarted with backoff, and a clean
// stop on shutdown.
#pragma once

#include <sys/types.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/measure.h"
#include "core/status.h"
#include "daemon/bootstrap/dockerd_config.h"
#include "daemon/bootstrap/dockerd_hardening.h"

namespace ci::daemon {

namespace asio = boost::asio;

struct NestedDockerdReport {
  pid_t pid = 0;           // 0 while it is not running
  bool answering = false;  // /_ping answered since it was last started
  int restarts = 0;
  std::string storage_driver;
  std::string last_exit;  // "exited with status 1" of the last crash, "" if none
  bool security_read = false;
  ProcessSecurity security;  // what /proc/PID/status says it was given
  std::vector<std::string> dropped_capabilities;
};

// Executors of a nested dockerd without userns-remap run as uid 65532 of the host's namespace.
Downgrade UsernsRemapDowngrade(const std::string& reason);

class NestedDockerd : public std::enable_shared_from_this<NestedDockerd> {
 public:
  // `executor_seccomp_json`: the profile dockerd gives containers by default (seccomp-profile).
  NestedDockerd(asio::any_io_executor ex, DockerdSettings settings, DockerdHardening hardening,
                std::string executor_seccomp_json);
  ~NestedDockerd();

  // Writes the configuration, starts dockerd and waits until /_ping answers (at most `timeout`).
  // overlay2 falls back to vfs (a downgrade) when the data root is on overlayfs, or once when
  // dockerd exits at startup naming overlay. Then supervises it. The error carries dockerd's
  // last log lines.
  asio::awaitable<Status> Start(std::chrono::seconds timeout);
  // SIGTERM, then SIGKILL after `grace`; no restart after this.
  asio::awaitable<void> Stop(std::chrono::seconds grace);

  const DockerdSettings& settings() const { return settings_; }
  const std::vector<Downgrade>& downgrades() const { return downgrades_; }
  NestedDockerdReport Report() const;

 private:
  Status WriteConfiguration();
  Status Spawn();
  asio::awaitable<void> ForwardLog(int fd);
  asio::awaitable<void> Watch(pid_t pid, int pidfd);
  asio::awaitable<void> Restart();
  // Polls /_ping until the dockerd of `pid` answers, exits or `timeout` passes.
  asio::awaitable<bool> WaitForPing(pid_t pid, std::chrono::seconds timeout);
  std::string LastLines() const;

  asio::any_io_executor ex_;
  DockerdSettings settings_;
  DockerdHardening hardening_;
  std::string executor_seccomp_json_;
  std::vector<Downgrade> downgrades_;
  pid_t pid_ = 0;
  bool answering_ = false;
  bool supervising_ = false;
  bool stopping_ = false;
  int restarts_ = 0;
  std::chrono::steady_clock::time_point started_at_;
  std::chrono::seconds backoff_{1};
  std::string last_exit_;
  std::deque<std::string> last_lines_;  // dockerd's latest log lines, for error messages
};

}  // namespace ci::daemon
