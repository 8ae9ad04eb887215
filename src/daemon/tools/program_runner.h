// One program run for a tool or an agent's attempt: admitted like an execution (the same slots
// as POST /v1/execute), planned, run in a fresh sandbox, its output capped and its verdict named.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "core/executor.h"
#include "daemon/service/admission.h"
#include "daemon/service/execution_service.h"

namespace ci::daemon {

struct ProgramRequest {
  std::string code;
  std::string language = "python";
  std::optional<std::string> stdin_data;
  int64_t timeout_ms = 2000;
  std::string client;  // whose files the outputs become
};

// What a program did, as the API reports an execution (docs/api.md "POST /v1/execute").
struct ProgramResult {
  std::string stdout_text;
  std::string stderr_text;
  std::optional<int> exit_code;
  std::optional<int> signal;
  bool timed_out = false;
  std::string verdict;  // "ok", "error", "timeout", ...
  uint64_t duration_ms = 0;
  std::vector<OutputFile> files;
  std::vector<std::string> results;  // rich results, each a JSON object (result_bundles.h)
};

class ProgramRunner {
 public:
  // `admission` null: no limit (the CLI's own single runs).
  ProgramRunner(ExecutionService& service, Admission* admission)
      : service_(service), admission_(admission) {}

  // The program's result, or why it did not run: 422 (unknown language, bad timeout), 429 (no
  // slot within the queue timeout), 503/500 (no sandbox). `on_output` (may be empty) sees the
  // output as it is produced.
  boost::asio::awaitable<std::variant<ProgramResult, ApiError>> Run(const ProgramRequest& request,
                                                                    OutputSink on_output);

  const ExecutionService& service() const { return service_; }

 private:
  ExecutionService& service_;
  Admission* admission_;
};

}  // namespace ci::daemon
