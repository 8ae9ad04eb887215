#include "daemon/tools/sandbox_tools.h"

#include <fmt/format.h>

#include "core/json.h"
#include "daemon/tools/solve_json.h"
#include "daemon/tools/tool_declarations.h"

namespace ci::daemon {
namespace {

ToolOutcome CallError(std::string text) { return ToolOutcome{true, std::move(text), "{}", {}}; }

// The arguments object, or why not.
Result<rapidjson::Document> ParseArguments(std::string_view tool, const std::string& json) {
  rapidjson::Document doc;
  std::string why;
  if (!ParseJson(json, doc, why)) {
    return Status::Error(fmt::format("{}: the arguments are not JSON ({})", tool, why));
  }
  if (!doc.IsObject())
    return Status::Error(fmt::format("{}: the arguments must be an object", tool));
  return doc;
}

// A string argument: absent leaves `out` as it is; another type is an error.
Status StringArgument(const rapidjson::Document& args, std::string_view tool, const char* name,
                      bool required, std::string& out) {
  auto it = args.FindMember(name);
  if (it == args.MemberEnd() || it->value.IsNull()) {
    return required ? Status::Error(fmt::format("{}: '{}' is required", tool, name)) : Status();
  }
  if (!it->value.IsString())
    return Status::Error(fmt::format("{}: '{}' must be a string", tool, name));
  out.assign(it->value.GetString(), it->value.GetStringLength());
  return Status();
}

Status IntegerArgument(const rapidjson::Document& args, std::string_view tool, const char* name,
                       int64_t min, int64_t max, int64_t& out) {
  auto it = args.FindMember(name);
  if (it == args.MemberEnd() || it->value.IsNull()) return Status();
  if (!it->value.IsInt64() || it->value.GetInt64() < min || it->value.GetInt64() > max) {
    return Status::Error(
        fmt::format("{}: '{}' must be an integer from {} to {}", tool, name, min, max));
  }
  out = it->value.GetInt64();
  return Status();
}

std::string ExecuteResultJson(const ProgramResult& r) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "stdout", r.stdout_text);
    WriteField(w, "stderr", r.stderr_text);
    w.Key("exit_code");
    if (r.exit_code) {
      w.Int(*r.exit_code);
    } else {
      w.Null();
    }
    WriteField(w, "verdict", r.verdict);
    w.Key("timed_out");
    w.Bool(r.timed_out);
    w.Key("duration_ms");
    w.Uint64(r.duration_ms);
    w.EndObject();
  });
}

// The PNG and JPEG images among the program's rich results.
std::vector<ToolOutcome::Image> ImagesOf(const ProgramResult& r) {
  std::vector<ToolOutcome::Image> out;
  for (const std::string& bundle : r.results) {
    auto doc = ParseJsonObject(bundle, "a result");
    if (!doc.ok()) continue;
    for (auto [field, mime] :
         {std::pair<const char*, const char*>{"png", "image/png"}, {"jpeg", "image/jpeg"}}) {
      auto m = doc->FindMember(field);
      if (m != doc->MemberEnd() && m->value.IsString()) {
        out.push_back({mime, std::string(m->value.GetString(), m->value.GetStringLength())});
      }
    }
  }
  return out;
}

// For a reader: the output, then what went wrong, if anything.
std::string ExecuteResultText(const ProgramResult& r) {
  std::string text = r.stdout_text;
  if (!r.stderr_text.empty()) text += "\n[stderr]\n" + r.stderr_text;
  if (r.verdict != "ok" || r.exit_code.value_or(-1) != 0) {
    text += fmt::format("\n[exit code {}, verdict {}]",
                        r.exit_code ? std::to_string(*r.exit_code) : "none", r.verdict);
  }
  return text;
}

}  // namespace

std::vector<llm::ToolDeclaration> SandboxTools::Declarations() const {
  const auto& languages = runner_.service().languages();
  const Config& config = runner_.service().config();
  std::vector<llm::ToolDeclaration> out{ExecuteCodeDeclaration(languages, config)};
  if (solver_ != nullptr) out.push_back(SolveTaskDeclaration(languages, config));
  return out;
}

boost::asio::awaitable<ToolOutcome> SandboxTools::Call(const std::string& name,
                                                       const std::string& arguments_json,
                                                       const std::string& client) {
  if (name == kExecuteCode) co_return co_await ExecuteCode(arguments_json, client);
  if (name == kSolveTask && solver_ != nullptr)
    co_return co_await SolveTask(arguments_json, client);
  if (name == kSolveTask) {
    co_return CallError(
        "solve_task: no model is configured on this daemon (set LLM_PROVIDER and LLM_MODEL)");
  }
  co_return CallError("unknown tool '" + name + "': this daemon has execute_code and solve_task");
}

boost::asio::awaitable<ToolOutcome> SandboxTools::ExecuteCode(const std::string& arguments_json,
                                                              const std::string& client) {
  auto args = ParseArguments(kExecuteCode, arguments_json);
  if (!args.ok()) co_return CallError(args.status().message());
  ProgramRequest request;
  request.client = client;
  std::string stdin_data;
  bool has_stdin = args->HasMember("stdin") && !(*args)["stdin"].IsNull();
  for (Status s :
       {StringArgument(*args, kExecuteCode, "code", true, request.code),
        StringArgument(*args, kExecuteCode, "language", false, request.language),
        StringArgument(*args, kExecuteCode, "stdin", false, stdin_data),
        IntegerArgument(*args, kExecuteCode, "timeout_ms", 1,
                        runner_.service().config().max_exec_timeout_ms, request.timeout_ms)}) {
    if (!s.ok()) co_return CallError(s.message());
  }
  if (has_stdin) request.stdin_data = std::move(stdin_data);
  OutputSink no_sink;
  auto ran = co_await runner_.Run(request, std::move(no_sink));
  if (auto* e = std::get_if<ApiError>(&ran)) co_return CallError("execute_code: " + e->detail);
  const auto& result = std::get<ProgramResult>(ran);
  ToolOutcome outcome{false, ExecuteResultText(result), ExecuteResultJson(result), {}};
  outcome.images = ImagesOf(result);
  co_return outcome;
}

boost::asio::awaitable<ToolOutcome> SandboxTools::SolveTask(const std::string& arguments_json,
                                                            const std::string& client) {
  auto args = ParseArguments(kSolveTask, arguments_json);
  if (!args.ok()) co_return CallError(args.status().message());
  SolveRequest request;
  request.client = client;
  int64_t max_attempts = request.max_attempts;
  for (Status s : {StringArgument(*args, kSolveTask, "detailedDescription", true, request.task),
                   StringArgument(*args, kSolveTask, "language", false, request.language),
                   IntegerArgument(*args, kSolveTask, "max_attempts", 1, 10, max_attempts)}) {
    if (!s.ok()) co_return CallError(s.message());
  }
  request.max_attempts = static_cast<int>(max_attempts);
  request.timeout_ms = DefaultSolveTimeoutMs(request.language);
  SolveHooks no_hooks;
  SolveOutcome outcome = co_await solver_->Solve(request, no_hooks);
  if (outcome.error) co_return CallError("solve_task: " + outcome.error->detail);
  std::string text =
      outcome.solved
          ? outcome.output
          : fmt::format("No working program after {} attempts; the last one failed: {}.\n{}",
                        outcome.attempts.size(), outcome.attempts.back().failure, outcome.output);
  co_return ToolOutcome{
      false, std::move(text), SolveOutcomeJson(outcome, request, solver_->model().model()), {}};
}

}  // namespace ci::daemon
