#include "daemon/service/metrics.h"

#include <fmt/format.h>

#include <tuple>

namespace ci::daemon {
namespace {

const std::vector<double> kBuckets = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
const char* const kOperations[] = {"execute",      "execute_stream",  "session_create",
                                   "session_bash", "session_execute", "session_execute_stream"};

Histogram& Get(std::map<std::string, Histogram>& m, const std::string& key) {
  return m.try_emplace(key, kBuckets).first->second;
}

void Header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::Render(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    std::string le = i < bounds_.size() ? fmt::format("{}", bounds_[i]) : "+Inf";
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, le, cumulative);
  }
  out +=
      fmt::format("{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name, labels, sum_, name, labels, count_);
}

void Metrics::Finished(const std::string& operation, const std::string& outcome, double seconds) {
  --active_[operation];
  ++completed_[{operation, outcome}];
  Get(duration_, operation).Observe(seconds);
}

void Metrics::Rejected(const std::string& operation, int status, const std::string& reason) {
  ++rejected_[{operation, status, reason}];
}

void Metrics::AdmissionWait(const std::string& operation, double seconds) {
  Get(admission_wait_, operation).Observe(seconds);
}

std::string Metrics::Render() const {
  std::string out;
  Header(out, "code_interpreter_executions_active", "gauge", "Executions running now.");
  for (const char* op : kOperations) {
    auto it = active_.find(op);
    out += fmt::format("code_interpreter_executions_active{{operation=\"{}\"}} {}\n", op,
                       it == active_.end() ? 0 : it->second);
  }
  Header(out, "code_interpreter_sessions_active", "gauge", "Sessions alive now.");
  out += fmt::format("code_interpreter_sessions_active {}\n", sessions_ ? sessions_() : 0);
  Header(out, "code_interpreter_executions_limit", "gauge",
         "MAX_CONCURRENT_EXECUTIONS: executions allowed to run at once.");
  out += fmt::format("code_interpreter_executions_limit {}\n", limit_);
  Header(out, "code_interpreter_executions_rejected_total", "counter",
         "Executions refused before running (429 saturated, 503 no capacity).");
  for (const auto& [key, n] : rejected_) {
    const auto& [op, status, reason] = key;
    out += fmt::format(
        "code_interpreter_executions_rejected_total{{operation=\"{}\",status=\"{}\","
        "reason=\"{}\"}} {}\n",
        op, status, reason, n);
  }
  Header(out, "code_interpreter_executions_completed_total", "counter",
         "Executions that ran, by outcome (ok, timed_out, error).");
  for (const auto& [key, n] : completed_) {
    out += fmt::format(
        "code_interpreter_executions_completed_total{{operation=\"{}\",outcome=\"{}\"}} {}\n",
        key.first, key.second, n);
  }
  Header(out, "code_interpreter_admission_wait_seconds", "histogram",
         "Time a request waited for an execution slot.");
  for (const auto& [op, h] : admission_wait_) {
    h.Render(out, "code_interpreter_admission_wait_seconds", fmt::format("operation=\"{}\"", op));
  }
  Header(out, "code_interpreter_execution_duration_seconds", "histogram",
         "Wall time of an execution, from admission to the end of cleanup.");
  for (const auto& [op, h] : duration_) {
    h.Render(out, "code_interpreter_execution_duration_seconds",
             fmt::format("operation=\"{}\"", op));
  }
  return out;
}

}  // namespace ci::daemon
