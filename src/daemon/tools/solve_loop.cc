#include "daemon/tools/solve_loop.h"

#include <fmt/format.h>

#include "daemon/tools/program_extraction.h"
#include "daemon/tools/stderr_noise.h"
#include "daemon/tools/tool_declarations.h"

namespace ci::daemon {
namespace {

// Enough of a failure's output for the model to see what went wrong, not its whole output.
constexpr size_t kFeedbackStderrBytes = 4000;
constexpr size_t kFeedbackStdoutBytes = 2000;

std::string DisplayName(std::string_view language) {
  if (language == "python") return "Python";
  if (language == "javascript") return "JavaScript (Node.js)";
  if (language == "go") return "Go";
  if (language == "bash") return "Bash";
  return std::string(language);
}

std::string LanguageRules(std::string_view language) {
  if (language == "go") {
    return "Write one file: package main with func main. Use the standard library only; the Go "
           "version is that of the sandbox, so avoid features newer than Go 1.19.";
  }
  if (language == "python") return "Use Python 3 and only the packages named above.";
  return "";
}

std::string Instructions(const SolveRequest& request, const ProgramRunner& runner) {
  const std::string name = DisplayName(request.language);
  return fmt::format(
      "You solve tasks by writing a complete {0} program that computes the answer. The program "
      "is run as it is, and what it prints to stdout is the answer: print the result clearly, "
      "nothing interactive. {1} {2} Each run may take at most {3} ms. Answer with the whole "
      "program in one fenced code block (```{4}) and nothing else; if a run fails you get its "
      "errors and answer with the whole corrected program.",
      name, SandboxFacts(runner.service().languages(), runner.service().config()),
      LanguageRules(request.language), request.timeout_ms, request.language);
}

// fmt rather than string operator+: GCC 12 at -O3 warns falsely (-Wrestrict) about the latter.
std::string Head(std::string_view s, size_t n) {
  if (s.size() <= n) return std::string(s);
  return fmt::format("{}\n...[{} bytes cut]", s.substr(0, n), s.size() - n);
}

// The end holds what failed last (a traceback's exception, the compiler's last error).
std::string Tail(std::string_view s, size_t n) {
  if (s.size() <= n) return std::string(s);
  return fmt::format("[{} bytes cut]...\n{}", s.size() - n, s.substr(s.size() - n));
}

std::string Feedback(const Attempt& a, const SolveRequest& request) {
  const std::string name = DisplayName(request.language);
  if (!a.ran) {
    return fmt::format(
        "Your answer held no program. Answer with the complete {} program in one fenced code "
        "block (```{}).",
        name, request.language);
  }
  const ProgramResult& r = a.result;
  std::string exit = "none";
  if (r.exit_code) {
    exit = std::to_string(*r.exit_code);
  } else if (r.signal) {
    exit = fmt::format("none (killed by signal {})", *r.signal);
  }
  return fmt::format(
      "The program failed: {}.\nExit code: {}. Verdict: {}.\nstderr:\n```\n{}\n```\nstdout:\n"
      "```\n{}\n```\nFix the program and answer with the complete corrected {} program in one "
      "fenced code block.",
      a.failure, exit, r.verdict, Tail(r.stderr_text, kFeedbackStderrBytes),
      Head(r.stdout_text, kFeedbackStdoutBytes), name);
}

ApiError ModelFailure(const llm::ModelError& e) {
  return ApiError{e.kind == llm::ModelError::Kind::kTimedOut ? 504 : 502,
                  "The model provider failed: " + e.message};
}

}  // namespace

int64_t DefaultSolveTimeoutMs(std::string_view language) {
  return language == "go" ? 20000 : 10000;
}

std::string JudgeRun(const ProgramResult& r, int64_t timeout_ms) {
  if (r.timed_out) return fmt::format("it timed out after {} ms", timeout_ms);
  if (r.verdict.ends_with("_limit") && r.verdict != "output_limit") {
    return "it hit the sandbox's limit (" + r.verdict + ")";
  }
  if (r.exit_code && *r.exit_code != 0) return fmt::format("it exited with code {}", *r.exit_code);
  if (!r.exit_code) {
    return r.signal ? fmt::format("it was killed by signal {}", *r.signal) : "it did not exit";
  }
  if (!WithoutNoise(r.stderr_text).empty()) return "it wrote errors to stderr";
  if (r.verdict == "output_limit") return "its output was cut at the sandbox's output limit";
  return "";
}

boost::asio::awaitable<std::variant<llm::Reply, ApiError>> SolveLoop::Ask(
    const std::vector<llm::Message>& conversation, const std::string& client) {
  // Held for the model request only, not while the program runs.
  auto admit = [&]() -> boost::asio::awaitable<std::optional<Admission::Permit>> {
    if (model_calls_ == nullptr) co_return std::nullopt;
    co_return co_await model_calls_->Acquire(client);
  };
  std::optional<Admission::Permit> permit = co_await admit();
  if (model_calls_ != nullptr && !permit) {
    const Admission::Refusal why = model_calls_->WhyRefused(client);
    if (why == Admission::Refusal::kForbidden) {
      co_return ApiError{403, "API key '" + client +
                                  "' may not call the model (model_calls=0 on its line in "
                                  "API_KEYS_FILE)"};
    }
    if (why == Admission::Refusal::kAtShare) {
      co_return ApiError{429, "API key '" + client + "' has " +
                                  std::to_string(model_calls_->share(client)) +
                                  " model calls in flight, its share (model_calls= on its line "
                                  "in API_KEYS_FILE, else MAX_MODEL_CALLS_PER_KEY); retry later"};
    }
    co_return ApiError{429,
                       "The model is busy: MAX_CONCURRENT_MODEL_CALLS calls are in flight on this "
                       "replica; retry later"};
  }
  const std::vector<llm::ToolDeclaration> no_tools;
  llm::ModelResult answer = co_await model_.Complete(conversation, no_tools);
  if (auto* e = std::get_if<llm::ModelError>(&answer)) co_return ModelFailure(*e);
  co_return std::move(std::get<llm::Reply>(answer));
}

boost::asio::awaitable<SolveOutcome> SolveLoop::Solve(const SolveRequest& request,
                                                      const SolveHooks& hooks) {
  SolveOutcome outcome;
  // A language that cannot run is refused before the model is asked for a program in it.
  const ExecutionService& service = runner_.service();
  auto runnable = BuildProgram(request.language, false, service.config().cpu_time_limit_sec,
                               service.languages());
  if (!runnable.ok()) {
    outcome.error = ApiError{422, runnable.status().message()};
    co_return outcome;
  }
  std::vector<llm::Message> conversation;
  conversation.push_back({llm::Message::Role::kSystem, Instructions(request, runner_), {}, {}, {}});
  conversation.push_back({llm::Message::Role::kUser, request.task, {}, {}, {}});
  for (int n = 1; n <= request.max_attempts; ++n) {
    if (hooks.abandoned && hooks.abandoned()) co_return outcome;
    auto answer = co_await Ask(conversation, request.client);
    if (auto* e = std::get_if<ApiError>(&answer)) {
      outcome.error = std::move(*e);
      co_return outcome;
    }
    llm::Reply& reply = std::get<llm::Reply>(answer);
    Attempt& a = outcome.attempts.emplace_back();
    a.number = n;
    a.model_wall = reply.wall;
    a.usage = reply.usage;
    a.code = ExtractProgram(reply.message.text, request.language);
    reply.message.tool_calls.clear();  // none were offered: a call is no program
    conversation.push_back(std::move(reply.message));
    if (hooks.program) hooks.program(a);
    if (a.code.empty()) {
      a.failure = "the answer held no program";
    } else {
      ProgramRequest run{a.code, request.language, std::nullopt, request.timeout_ms,
                         request.client};
      OutputSink sink;
      if (hooks.output) {
        sink = [&hooks, n](StreamKind kind, std::string_view data) { hooks.output(n, kind, data); };
      }
      auto ran = co_await runner_.Run(run, std::move(sink));
      if (auto* e = std::get_if<ApiError>(&ran)) {
        a.failure = "it could not be run: " + e->detail;  // the model's answer is kept
        if (hooks.attempt) hooks.attempt(a);
        outcome.error = *e;
        co_return outcome;
      }
      a.ran = true;
      a.result = std::move(std::get<ProgramResult>(ran));
      a.failure = JudgeRun(a.result, request.timeout_ms);
      outcome.output = a.result.stdout_text;
    }
    if (hooks.attempt) hooks.attempt(a);
    if (a.failure.empty()) {
      outcome.solved = true;
      co_return outcome;
    }
    conversation.push_back({llm::Message::Role::kUser, Feedback(a, request), {}, {}, {}});
  }
  co_return outcome;
}

}  // namespace ci::daemon
