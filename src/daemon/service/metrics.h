// Prometheus metrics of docs/api.md ("GET /metrics"), rendered in the text exposition format.
// The daemon's io_context is single-threaded, so no locking is needed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ci::daemon {

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

  void Started(const std::string& operation) { ++active_[operation]; }
  void Finished(const std::string& operation, const std::string& outcome, double seconds);
  void Rejected(const std::string& operation, int status, const std::string& reason);
  void AdmissionWait(const std::string& operation, double seconds);

  // The live session count, read at each scrape.
  void CountSessionsWith(std::function<size_t()> count) { sessions_ = std::move(count); }

  std::string Render() const;

 private:
  uint32_t limit_;
  std::function<size_t()> sessions_;
  std::map<std::string, int64_t> active_;                              // by operation
  std::map<std::pair<std::string, std::string>, uint64_t> completed_;  // (operation, outcome)
  std::map<std::tuple<std::string, int, std::string>, uint64_t> rejected_;
  std::map<std::string, Histogram> admission_wait_;  // by operation
  std::map<std::string, Histogram> duration_;        // by operation
};

}  // namespace ci::daemon
