// The agent loop (docs/agent.md "The agent loop"): ask the model for a program, run it in a fresh
// sandbox, and while it fails (a compile error, a crash, a timeout, a limit, stderr that is not
// noise) send the failure back in the same conversation and ask for the corrected program, up
// to max_attempts.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "daemon/tools/program_runner.h"
#include "llm/conversation.h"
#include "llm/provider.h"

namespace ci::daemon {

// Each program's run, when the request does not say: 10 s, 20 s for Go (its build counts).
int64_t DefaultSolveTimeoutMs(std::string_view language);

struct SolveRequest {
  std::string task;
  std::string language = "python";
  int max_attempts = 3;  // 1..10
  int64_t timeout_ms = DefaultSolveTimeoutMs("python");
  std::string client;
};

struct Attempt {
  int number = 0;    // from 1
  std::string code;  // "" when the answer held no program
  bool ran = false;  // false: nothing to run
  ProgramResult result;
  std::string failure;  // why it was not accepted; "" when it was
  std::chrono::milliseconds model_wall{0};
  llm::Usage usage;
};

struct SolveOutcome {
  bool solved = false;
  std::string output;  // the stdout of the last attempt that ran
  std::vector<Attempt> attempts;
  // The loop stopped before an answer: the model failed (502, 504) or a program could not be run
  // (429, 503, ...). The attempts made until then are kept.
  std::optional<ApiError> error;
};

// Seen while the loop runs (the SSE stream): each may be empty.
struct SolveHooks {
  std::function<void(const Attempt&)> program;  // the model's program, before it runs
  std::function<void(int attempt, StreamKind, std::string_view)> output;
  std::function<void(const Attempt&)> attempt;  // an attempt judged
  // True once nobody waits for the outcome (the client left): no further model call is made.
  std::function<bool()> abandoned;
};

// The verdict on an attempt's run: "" accepted, else why not ("it exited with code 1").
std::string JudgeRun(const ProgramResult& result, int64_t timeout_ms);

class SolveLoop {
 public:
  // `model_calls` (null: no limit, the CLI) admits each model request: at most
  // MAX_CONCURRENT_MODEL_CALLS in flight, a key's share of them (issue #30 item 8).
  SolveLoop(llm::Provider& model, ProgramRunner& runner, Admission* model_calls = nullptr)
      : model_(model), runner_(runner), model_calls_(model_calls) {}
  boost::asio::awaitable<SolveOutcome> Solve(const SolveRequest& request, const SolveHooks& hooks);
  const llm::Provider& model() const { return model_; }

 private:
  // The answer to the conversation so far, or why there is none (429: no model slot in time).
  boost::asio::awaitable<std::variant<llm::Reply, ApiError>> Ask(
      const std::vector<llm::Message>& conversation, const std::string& client);

  llm::Provider& model_;
  ProgramRunner& runner_;
  Admission* model_calls_;
};

}  // namespace ci::daemon
