// Execution containers put back as they started by their agent (src/agent/recycle.h), waiting
// for the next execution of the same configuration: a container serves many executions one after
// the other, so that back-to-back requests do not wait for container creations (~150-250 ms of
// the Engine's time each, which two cores cannot sustain at the request rate).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "container/agent_channel.h"
#include "container/cgroup_probe.h"
#include "container/container_api.h"
#include "container/container_exec.h"
#include "core/sandbox_spec.h"

namespace ci::container {

struct RecycledContainer {
  std::string id;
  std::shared_ptr<ContainerApi> api;  // its AgentContainer
  std::shared_ptr<AgentChannel> channel;
  CountersBaseline baseline;                       // its counters when it was put back
  std::chrono::steady_clock::time_point put_at{};  // set by RecycleBin::Put
};

// A container's place in the bin: its configuration (DockerExecutor's RecycleKey) and the client
// whose program it ran last. It is reused for that client only (issue #30: one tenant's leftover
// must never meet another's program); without API keys every request is the client "".
std::string RecycleBinKey(const std::string& configuration, const std::string& client);

class RecycleBin {
 public:
  explicit RecycleBin(size_t capacity) : capacity_(capacity) {}
  // False when the bin is full or closed: the caller removes the container.
  bool Put(const std::string& key, RecycledContainer c);
  // A container of configuration `key` whose agent is still there; the dead ones met on the way
  // go to `dead` (the caller removes them).
  std::optional<RecycledContainer> Take(const std::string& key,
                                        std::vector<RecycledContainer>* dead);
  // What has waited longer than `max_idle` (the caller removes them).
  std::vector<RecycledContainer> TakeIdle(std::chrono::steady_clock::duration max_idle);
  // Refuses every Put from now on and hands out what it holds (shutdown).
  std::vector<RecycledContainer> Close();
  size_t size() const { return size_; }

 private:
  size_t capacity_;
  size_t size_ = 0;
  bool closed_ = false;
  std::map<std::string, std::deque<RecycledContainer>> by_key_;
};

// A container of `key` from `bin`, the dead ones met on the way removed in the background on
// `ex`.
std::optional<RecycledContainer> TakeRecycled(RecycleBin& bin, const std::string& key,
                                              const asio::any_io_executor& ex);
// What drives an execution of `spec` in `recycled` (Docker's and Kubernetes' alike); `zygote`: its
// agent keeps a fork server for it, or starts it again.
Container ContainerOfRecycled(RecycledContainer recycled, const SandboxSpec& spec,
                              asio::any_io_executor ex, bool zygote);
// Removes in the background on `ex` what has waited in `bin` longer than `max_idle`.
void RemoveIdle(RecycleBin& bin, std::chrono::steady_clock::duration max_idle,
                const asio::any_io_executor& ex);
// Closes `bin` and removes what it held (an executor's Drain).
asio::awaitable<void> CloseAndRemove(RecycleBin& bin);

}  // namespace ci::container
