// Prometheus metrics of docs/api.md ("GET /metrics"), rendered in the text exposition format.
// The daemon's io_context is single-threaded, so no locking is needed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/executor.h"
#include "daemon/egress/egress_proxy.h"
#include "daemon/service/warm_pool.h"

namespace ci::daemon {

// What was executed: the `operation` label.
enum class Operation {
  kExecute,
  kExecuteStream,
  kSessionCreate,
  kSessionBash,
  kSessionExecute,
  kSessionExecuteStream,
};
inline constexpr Operation kOperations[] = {
    Operation::kExecute,     Operation::kExecuteStream,  Operation::kSessionCreate,
    Operation::kSessionBash, Operation::kSessionExecute, Operation::kSessionExecuteStream};
std::string_view OperationName(Operation op);

// How an admitted execution ended: the `outcome` label. A program's own failure is kOk for the
// service; kUnavailable is one that did not run for lack of capacity (503), counted as a
// rejection and as an error.
enum class Outcome { kOk, kTimedOut, kError, kUnavailable };
std::string_view OutcomeName(Outcome outcome);

// Why an execution was refused before running: the `status` and `reason` labels.
enum class Rejection {
  kSaturated,   // 429: no slot within QUEUE_TIMEOUT
  kNoCapacity,  // 503: the backend or the session limit had no room
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  void Render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; one more for +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  explicit Metrics(uint32_t limit) : limit_(limit) {}

  void Started(Operation op) { ++active_[op]; }
  void Finished(Operation op, Outcome outcome, double seconds);
  void Rejected(Operation op, Rejection why) { ++rejected_[{op, why}]; }
  void AdmissionWait(Operation op, double seconds);

  // The live session count, read at each scrape.
  void CountSessionsWith(std::function<size_t()> count) { sessions_ = std::move(count); }
  // The warm pools' figures, read at each scrape.
  void ReadWarmPoolsWith(std::function<std::vector<WarmPoolStats>()> read) {
    warm_pools_ = std::move(read);
  }

  // The backend's own figures, read at each scrape.
  void ReadBackendWith(std::function<std::vector<BackendMetric>()> read) {
    backend_ = std::move(read);
  }

  // Egress connections allowed and refused, read at each scrape.
  void ReadEgressWith(std::function<const EgressCounters*()> read) { egress_ = std::move(read); }

  std::string Render() const;

 private:
  static void RenderWarmPools(std::string& out, const std::vector<WarmPoolStats>& pools);
  uint32_t limit_;
  std::function<size_t()> sessions_;
  std::function<std::vector<WarmPoolStats>()> warm_pools_;
  std::function<std::vector<BackendMetric>()> backend_;
  std::function<const EgressCounters*()> egress_;
  std::map<Operation, int64_t> active_;
  std::map<std::pair<Operation, Outcome>, uint64_t> completed_;
  std::map<std::pair<Operation, Rejection>, uint64_t> rejected_;
  std::map<Operation, Histogram> admission_wait_;
  std::map<Operation, Histogram> duration_;
};

}  // namespace ci::daemon
