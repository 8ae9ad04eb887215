#include "container/recycle_bin.h"

namespace ci::container {

std::string RecycleBinKey(const std::string& configuration, const std::string& client) {
  std::string key = configuration;
  key.push_back('\0');  // in neither part: no two pairs make the same key
  key += client;
  return key;
}

bool RecycleBin::Put(const std::string& key, RecycledContainer c) {
  if (closed_ || size_ >= capacity_) return false;
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

}  // namespace ci::container
