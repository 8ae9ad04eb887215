#include "container/recycle_bin.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "core/resource_report.h"

namespace ci::container {
namespace {

// Its channel closed first, so that its AgentContainer removes it instead of recycling it.
asio::awaitable<void> RemoveRecycled(RecycledContainer c) {
  c.channel->Close();
  ResourceReport ignored;
  co_await c.api->Remove(ignored);
}

}  // namespace

std::string RecycleBinKey(const std::string& configuration, const std::string& client) {
  std::string key = configuration;
  key.push_back('\0');  // in neither part: no two pairs make the same key
  key += client;
  return key;
}

bool RecycleBin::Put(const std::string& key, RecycledContainer c) {
  if (closed_ || size_ >= capacity_) return false;
  c.put_at = std::chrono::steady_clock::now();
  by_key_[key].push_back(std::move(c));
  ++size_;
  return true;
}

std::optional<RecycledContainer> RecycleBin::Take(const std::string& key,
                                                  std::vector<RecycledContainer>* dead) {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return std::nullopt;
  auto& queue = it->second;
  std::optional<RecycledContainer> found;
  while (!queue.empty() && !found) {
    RecycledContainer c = std::move(queue.front());
    queue.pop_front();
    --size_;
    if (c.channel->ended()) {
      dead->push_back(std::move(c));
    } else {
      found = std::move(c);
    }
  }
  if (queue.empty()) by_key_.erase(it);
  return found;
}

std::vector<RecycledContainer> RecycleBin::TakeIdle(std::chrono::steady_clock::duration max_idle) {
  const auto oldest = std::chrono::steady_clock::now() - max_idle;
  std::vector<RecycledContainer> idle;
  for (auto it = by_key_.begin(); it != by_key_.end();) {
    auto& queue = it->second;  // oldest first
    while (!queue.empty() && queue.front().put_at < oldest) {
      idle.push_back(std::move(queue.front()));
      queue.pop_front();
      --size_;
    }
    it = queue.empty() ? by_key_.erase(it) : std::next(it);
  }
  return idle;
}

std::vector<RecycledContainer> RecycleBin::Close() {
  closed_ = true;
  std::vector<RecycledContainer> all;
  for (auto& [key, queue] : by_key_) {
    for (auto& c : queue) all.push_back(std::move(c));
  }
  by_key_.clear();
  size_ = 0;
  return all;
}

std::optional<RecycledContainer> TakeRecycled(RecycleBin& bin, const std::string& key,
                                              const asio::any_io_executor& ex) {
  std::vector<RecycledContainer> dead;
  auto found = bin.Take(key, &dead);
  for (RecycledContainer& c : dead)
    asio::co_spawn(ex, RemoveRecycled(std::move(c)), asio::detached);
  return found;
}

Container ContainerOfRecycled(RecycledContainer recycled, const SandboxSpec& spec,
                              asio::any_io_executor ex, bool zygote) {
  Container c;
  c.api = std::move(recycled.api);
  c.ex = std::move(ex);
  c.id = std::move(recycled.id);
  c.cwd = spec.cwd;
  c.cpu_time_sec = spec.limits.cpu_time_sec;
  c.baseline = recycled.baseline;
  c.prestart_argv = spec.prestart_argv;
  c.zygote = zygote;
  return c;
}

void RemoveIdle(RecycleBin& bin, std::chrono::steady_clock::duration max_idle,
                const asio::any_io_executor& ex) {
  for (RecycledContainer& c : bin.TakeIdle(max_idle)) {
    asio::co_spawn(ex, RemoveRecycled(std::move(c)), asio::detached);
  }
}

asio::awaitable<void> CloseAndRemove(RecycleBin& bin) {
  for (RecycledContainer& c : bin.Close()) co_await RemoveRecycled(std::move(c));
}

}  // namespace ci::container
