#include "docker/reaper.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <utility>
#include <vector>

#include "core/json.h"
#include "core/unix_time.h"
#include "docker/container_config.h"

namespace ci::docker {
namespace {

// Is the owner "<host>@<pid namespace>/<pid>" a daemon that is gone? Only a pid of our own pid
// namespace can be judged by kill(): daemons in containers on the host's network share its
// hostname but each has its own pid namespace (and the same pid), so another namespace's or
// another host's containers are left to expires-at.
bool OwnerGone(const std::string& owner, const std::string& self, int64_t created,
               int64_t started_at) {
  size_t slash = owner.rfind('/');
  if (slash == std::string::npos || self.compare(0, slash + 1, owner, 0, slash + 1) != 0) {
    return false;
  }
  if (owner == self) return created < started_at;
  pid_t pid = static_cast<pid_t>(std::strtol(owner.c_str() + slash + 1, nullptr, 10));
  return pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH);
}

}  // namespace

std::string OwnerPrefixHere() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  struct stat ns = {};
  ::stat("/proc/self/ns/pid", &ns);
  return std::string(host) + "@" + std::to_string(ns.st_ino) + "/";
}

std::string OwnerHere() { return OwnerPrefixHere() + std::to_string(::getpid()); }

asio::awaitable<void> Reap(std::shared_ptr<ReaperState> st) {
  st->running = true;
  bool startup = !st->first_done;
  std::string path =
      "/containers/json?all=1&filters=%7B%22label%22%3A%5B%22app%3Dcode-interpreter%22%5D%7D";
  auto r = co_await st->client->Request("GET", path);
  rapidjson::Document doc;
  std::string why;
  if (!r.ok() || !r->ok() || !ParseJson(r->body, doc, why) || !doc.IsArray()) {
    std::string what = !r.ok() ? r.status().message() : "HTTP " + std::to_string(r->status);
    spdlog::warn("reaper: listing containers failed: {}", what);
    st->running = false;
    co_return;
  }
  const int64_t now = UnixSeconds();
  std::vector<std::pair<std::string, std::string>> doomed;  // id, reason
  for (const auto& c : doc.GetArray()) {
    if (!c.IsObject() || !c.HasMember("Id") || !c["Id"].IsString()) continue;
    auto label = [&](const char* k) -> std::string {
      if (!c.HasMember("Labels") || !c["Labels"].IsObject() || !c["Labels"].HasMember(k) ||
          !c["Labels"][k].IsString()) {
        return "";
      }
      return c["Labels"][k].GetString();
    };
    int64_t created =
        c.HasMember("Created") && c["Created"].IsInt64() ? c["Created"].GetInt64() : 0;
    std::string expires = label(kExpiresLabel);
    int64_t expires_at = expires.empty() ? 0 : std::strtoll(expires.c_str(), nullptr, 10);
    if (expires_at > 0 && expires_at < now) {
      doomed.emplace_back(c["Id"].GetString(), "expired");
    } else if (startup &&
               (label(kComponentLabel) == "executor" || label(kComponentLabel) == "session") &&
               OwnerGone(label(kOwnerLabel), st->owner, created, st->started_at)) {
      doomed.emplace_back(c["Id"].GetString(), "left by a daemon that is gone");
    }
  }
  for (const auto& [id, reason] : doomed) {
    std::string del = "/containers/" + id + "?force=1&v=1";
    auto d = co_await st->client->Request("DELETE", del);
    if (d.ok() && (d->ok() || d->status == 404)) {
      spdlog::info("reaper: removed container {} ({})", id.substr(0, 12), reason);
    } else {
      spdlog::warn("reaper: removing container {} failed", id.substr(0, 12));
    }
  }
  st->first_done = true;
  st->running = false;
}

}  // namespace ci::docker
