// Execution sandboxes put back as they started by their init (Msg::kRecycle, sandbox_recycle.cc)
// waiting for the next execution of the same spec and the same client: a sandbox serves many
// executions one after the other, so that its namespaces, mounts, cgroup and init are made once
// (issue 35). A sandbox goes only to the client whose program it ran last: without API keys every
// request is the client "".
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/sandbox_spec.h"

namespace ci::runtime {

struct SandboxCore;

// What a sandbox is, for the bin: its spec without the client and the pre-started program (a
// recycled sandbox starts the program its next spec asks for).
SandboxSpec RecycleSpec(SandboxSpec spec);

// Thread-safe: sandboxes are put back on their strands, taken on the requests'.
class RecycleBin {
 public:
  RecycleBin(size_t capacity, std::chrono::seconds max_idle)
      : capacity_(capacity), max_idle_(max_idle) {}
  // False when the bin is full or closed: the caller removes the sandbox.
  bool Put(std::shared_ptr<SandboxCore> core);
  // A sandbox of `spec` (RecycleSpec) that last ran `client`'s program and still lives; the dead
  // and those idle longer than max_idle met on the way go to `stale` (the caller removes them).
  std::shared_ptr<SandboxCore> Take(const SandboxSpec& spec, const std::string& client,
                                    std::vector<std::shared_ptr<SandboxCore>>* stale);
  // Refuses every Put from now on and hands out what it holds (shutdown).
  std::vector<std::shared_ptr<SandboxCore>> Close();
  size_t size() const;

 private:
  struct Held {
    std::shared_ptr<SandboxCore> core;
    std::chrono::steady_clock::time_point put_at;
  };
  mutable std::mutex mu_;
  size_t capacity_;
  std::chrono::seconds max_idle_;
  bool closed_ = false;
  std::deque<Held> held_;  // oldest first
};

}  // namespace ci::runtime
