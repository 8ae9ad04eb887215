#include "runtime/daemon/recycle_bin.h"

#include "runtime/daemon/local_sandbox.h"

namespace ci::runtime {

SandboxSpec RecycleSpec(SandboxSpec spec) {
  spec.client.clear();
  spec.prestart_argv.clear();
  return spec;
}

bool RecycleBin::Put(std::shared_ptr<SandboxCore> core) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || held_.size() >= capacity_) return false;
  held_.push_back({std::move(core), std::chrono::steady_clock::now()});
  return true;
}

std::shared_ptr<SandboxCore> RecycleBin::Take(const SandboxSpec& spec, const std::string& client,
                                              std::vector<std::shared_ptr<SandboxCore>>* stale) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  std::shared_ptr<SandboxCore> found;
  for (auto it = held_.begin(); it != held_.end();) {
    const bool expired = now - it->put_at > max_idle_ || !InitAlive(*it->core);
    if (!expired &&
        (found || it->core->recycle.client != client || !(it->core->recycle.spec == spec))) {
      ++it;
      continue;
    }
    if (expired) {
      stale->push_back(std::move(it->core));
    } else {
      found = std::move(it->core);
    }
    it = held_.erase(it);
  }
  return found;
}

std::vector<std::shared_ptr<SandboxCore>> RecycleBin::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  std::vector<std::shared_ptr<SandboxCore>> all;
  for (Held& h : held_) all.push_back(std::move(h.core));
  held_.clear();
  return all;
}

size_t RecycleBin::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size();
}

}  // namespace ci::runtime
