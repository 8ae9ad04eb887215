#include "daemon/service/metrics.h"

#include <fmt/format.h>

#include <tuple>

namespace ci::daemon {
namespace {

const std::vector<double> kBuckets = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
Histogram& Get(std::map<Operation, Histogram>& m, Operation key) {
  return m.try_emplace(key, kBuckets).first->second;
}

void Header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

std::string_view OperationName(Operation op) {
  switch (op) {
    case Operation::kExecute:
      return "execute";
    case Operation::kExecuteStream:
      return "execute_stream";
    case Operation::kSessionCreate:
      return "session_create";
    case Operation::kSessionBash:
      return "session_bash";
    case Operation::kSessionExecute:
      return "session_execute";
    case Operation::kSessionExecuteStream:
      return "session_execute_stream";
  }
  return "unknown";
}

std::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk:
      return "ok";
    case Outcome::kTimedOut:
      return "timed_out";
    case Outcome::kError:
      return "error";
    case Outcome::kUnavailable:
      return "unavailable";
  }
  return "unknown";
}

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

void Metrics::Finished(Operation op, Outcome outcome, double seconds) {
  --active_[op];
  if (outcome == Outcome::kUnavailable) {
    Rejected(op, Rejection::kNoCapacity);
    outcome = Outcome::kError;
  }
  ++completed_[{op, outcome}];
  Get(duration_, op).Observe(seconds);
}

void Metrics::AdmissionWait(Operation op, double seconds) {
  Get(admission_wait_, op).Observe(seconds);
}

std::string Metrics::Render() const {
  std::string out;
  Header(out, "code_interpreter_executions_active", "gauge", "Executions running now.");
  for (Operation op : kOperations) {
    auto it = active_.find(op);
    out += fmt::format("code_interpreter_executions_active{{operation=\"{}\"}} {}\n",
                       OperationName(op), it == active_.end() ? 0 : it->second);
  }
  Header(out, "code_interpreter_sessions_active", "gauge", "Sessions alive now.");
  out += fmt::format("code_interpreter_sessions_active {}\n", sessions_ ? sessions_() : 0);
  Header(out, "code_interpreter_executions_limit", "gauge",
         "MAX_CONCURRENT_EXECUTIONS: executions allowed to run at once.");
  out += fmt::format("code_interpreter_executions_limit {}\n", limit_);
  Header(out, "code_interpreter_executions_rejected_total", "counter",
         "Executions refused before running (429 saturated, 503 no capacity).");
  for (const auto& [key, n] : rejected_) {
    const auto& [op, why] = key;
    const bool saturated = why == Rejection::kSaturated;
    out += fmt::format(
        "code_interpreter_executions_rejected_total{{operation=\"{}\",status=\"{}\","
        "reason=\"{}\"}} {}\n",
        OperationName(op), saturated ? 429 : 503, saturated ? "saturated" : "capacity", n);
  }
  Header(out, "code_interpreter_executions_completed_total", "counter",
         "Executions that ran, by outcome (ok, timed_out, error).");
  for (const auto& [key, n] : completed_) {
    out += fmt::format(
        "code_interpreter_executions_completed_total{{operation=\"{}\",outcome=\"{}\"}} {}\n",
        OperationName(key.first), OutcomeName(key.second), n);
  }
  Header(out, "code_interpreter_admission_wait_seconds", "histogram",
         "Time a request waited for an execution slot.");
  for (const auto& [op, h] : admission_wait_) {
    h.Render(out, "code_interpreter_admission_wait_seconds",
             fmt::format("operation=\"{}\"", OperationName(op)));
  }
  Header(out, "code_interpreter_execution_duration_seconds", "histogram",
         "Wall time of an execution, from admission to the end of cleanup.");
  for (const auto& [op, h] : duration_) {
    h.Render(out, "code_interpreter_execution_duration_seconds",
             fmt::format("operation=\"{}\"", OperationName(op)));
  }
  RenderWarmPools(out, warm_pools_ ? warm_pools_() : std::vector<WarmPoolStats>{});
  const EgressCounters* egress = egress_ ? egress_() : nullptr;
  Header(out, "code_interpreter_egress_connections_total", "counter",
         "Connections through the sandboxes' egress proxies, allowed (reached) or refused.");
  out += fmt::format("code_interpreter_egress_connections_total{{outcome=\"allowed\"}} {}\n",
                     egress != nullptr ? egress->allowed.load() : 0);
  out += fmt::format("code_interpreter_egress_connections_total{{outcome=\"refused\"}} {}\n",
                     egress != nullptr ? egress->refused.load() : 0);
  for (const BackendMetric& m : backend_ ? backend_() : std::vector<BackendMetric>{}) {
    Header(out, m.name.c_str(), m.type.c_str(), m.help.c_str());
    out += fmt::format("{} {}\n", m.name, m.value);
  }
  return out;
}

void Metrics::RenderWarmPools(std::string& out, const std::vector<WarmPoolStats>& pools) {
  struct Series {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const WarmPoolStats&);
  };
  static constexpr Series kSeries[] = {
      {"code_interpreter_warm_pool_size", "gauge", "Sandboxes a warm pool keeps prepared.",
       [](const WarmPoolStats& s) { return static_cast<double>(s.size); }},
      {"code_interpreter_warm_pool_ready", "gauge", "Prepared sandboxes waiting in a warm pool.",
       [](const WarmPoolStats& s) { return static_cast<double>(s.ready); }},
      {"code_interpreter_warm_pool_hits_total", "counter",
       "Executions served by a sandbox from a warm pool.",
       [](const WarmPoolStats& s) { return static_cast<double>(s.hits); }},
      {"code_interpreter_warm_pool_misses_total", "counter",
       "Executions that found their warm pool empty: served by the refill under way (counted "
       "in _waits_total too) or by a sandbox made for them.",
       [](const WarmPoolStats& s) { return static_cast<double>(s.misses); }},
      {"code_interpreter_warm_pool_waits_total", "counter",
       "Executions that found their warm pool empty and took the sandbox its refill made.",
       [](const WarmPoolStats& s) { return static_cast<double>(s.waits); }},
      {"code_interpreter_warm_pool_dead_total", "counter",
       "Pooled sandboxes found gone (their init exited) when taken: replaced, not handed out.",
       [](const WarmPoolStats& s) { return static_cast<double>(s.dead); }},
      {"code_interpreter_warm_pool_fill_failures_total", "counter",
       "Sandboxes a warm pool failed to prepare; after each it waits 1 s, doubled up to 5 min "
       "while they keep failing.",
       [](const WarmPoolStats& s) { return static_cast<double>(s.fill_failures); }},
      {"code_interpreter_warm_pool_refill_lag_seconds_sum", "counter",
       "Seconds from each take of a pooled sandbox until its replacement was ready, summed.",
       [](const WarmPoolStats& s) { return s.refill_lag_sum; }},
      {"code_interpreter_warm_pool_refill_lag_seconds_count", "counter",
       "Replacements of taken pooled sandboxes (the count of the sum above).",
       [](const WarmPoolStats& s) { return static_cast<double>(s.refills); }},
      {"code_interpreter_warm_pool_refill_lag_seconds_max", "gauge",
       "The longest refill lag since the daemon started.",
       [](const WarmPoolStats& s) { return s.refill_lag_max; }},
  };
  for (const Series& series : kSeries) {
    Header(out, series.name, series.type, series.help);
    for (const WarmPoolStats& pool : pools) {
      out += fmt::format("{}{{pool=\"{}\"}} {}\n", series.name, pool.name, series.value(pool));
    }
  }
}

}  // namespace ci::daemon
