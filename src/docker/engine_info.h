// What the Engine says of itself (GET /info): whether it is rootless, its cgroup version and
// driver, its storage driver. Bootstrap reports it (/health `deployment.engine`) and names the
// downgrades it implies (a rootful socket, limits without cgroup v2 delegation).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ci::docker {

class EngineClient;

struct EngineInfo {
  std::string server_version;  // "20.10.24+dfsg1"
  bool rootless = false;       // SecurityOptions holds "name=rootless"
  std::string cgroup_version;  // "1" or "2"
  std::string cgroup_driver;   // "cgroupfs", "systemd", "none"
  std::string storage_driver;  // "overlay2", "vfs", "fuse-overlayfs"
  std::vector<std::string>
      security_options;               // "seccomp" ... as names ("name=seccomp,..." -> "seccomp")
  std::vector<std::string> warnings;  // the Engine's own (e.g. "No memory limit support")
};

// The /info body; an error when it is not a JSON object.
Result<EngineInfo> ParseEngineInfo(std::string_view json);

// GET /info on a negotiated client.
boost::asio::awaitable<Result<EngineInfo>> FetchEngineInfo(EngineClient& client);

}  // namespace ci::docker
