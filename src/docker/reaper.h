// The reaper (containers a crash left behind). Every container carries
// code-interpreter.owner=<hostname>@<pid namespace inode>/<daemon pid>. At the first sweep an
// executor or session container is removed when its owner is this host and pid namespace and a
// process that is gone (or ours, from before we started); every sweep removes containers
// of ours whose code-interpreter.expires-at is past (whoever owns them: sessions, other hosts).
// Other live daemons' executions on a shared dockerd are left alone.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "docker/engine_client.h"

namespace ci::docker {

inline constexpr const char* kOwnerLabel = "code-interpreter.owner";
inline constexpr std::chrono::seconds kReapPeriod{60};

// "<hostname>@<pid namespace inode>/": what the owners of this host and pid namespace start with.
// The namespace tells apart daemons in containers that share the host's hostname (--network
// host), each of which may be pid 2.
std::string OwnerPrefixHere();
// OwnerPrefixHere() + "<pid>": the owner label of this daemon's containers.
std::string OwnerHere();

struct ReaperState {
  std::shared_ptr<EngineClient> client;
  int64_t started_at = 0;  // unix seconds
  std::string owner;       // OwnerHere() at construction
  bool first_done = false;
  bool running = false;
  std::chrono::steady_clock::time_point last{};
};

// One sweep; the first also removes the containers of daemons that are gone.
asio::awaitable<void> Reap(std::shared_ptr<ReaperState> st);

}  // namespace ci::docker
