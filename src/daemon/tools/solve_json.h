// The agent loop's answer as JSON (docs/api.md "The agent loop"): one attempt, the whole
// outcome, and an error that keeps the attempts made before it.
#pragma once

#include <string>
#include <string_view>

#include "core/json.h"
#include "daemon/tools/solve_loop.h"

namespace ci::daemon {

// "model_ms", "prompt_tokens", "completion_tokens" of an attempt, inside an object.
void WriteModelCost(JsonWriter& w, const Attempt& attempt);
void WriteAttempt(JsonWriter& w, const Attempt& attempt);
std::string AttemptJson(const Attempt& attempt);

// {"status": "solved"|"failed", "output", "language", "model", "attempts", "usage"}.
std::string SolveOutcomeJson(const SolveOutcome& outcome, const SolveRequest& request,
                             std::string_view model);

// {"detail", "attempts"}: the answer of a loop that stopped on `outcome.error`.
std::string SolveErrorJson(const SolveOutcome& outcome);

}  // namespace ci::daemon
