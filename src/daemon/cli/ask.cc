// `code-interpreter ask "QUESTION"`: the model answers, calling solve_task (the agent loop, in
// local sandboxes of this process) whenever the question needs computing.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "core/json.h"
#include "daemon/cli/cli.h"
#include "daemon/cli/local_service.h"
#include "daemon/cli/logging.h"
#include "daemon/cli/model_setup.h"
#include "daemon/tools/sandbox_tools.h"
#include "daemon/tools/tool_declarations.h"
#include "daemon/tools/tool_round_trip.h"

namespace ci::daemon {
namespace {

constexpr const char* kAsk = "code-interpreter ask";

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "%s: %s\n", kAsk, message.c_str());
  return code;
}

// A line of what a tool call did, for stderr: the model's final answer alone goes to stdout.
std::string Summary(const ToolOutcome& outcome) {
  if (outcome.is_error) return "failed: " + outcome.text;
  rapidjson::Document doc;
  std::string why;
  if (!ParseJson(outcome.result_json, doc, why) || !doc.IsObject() || !doc.HasMember("status") ||
      !doc.HasMember("attempts") || !doc["status"].IsString() || !doc["attempts"].IsArray()) {
    return "done";
  }
  return std::string(doc["status"].GetString()) + " after " +
         std::to_string(doc["attempts"].Size()) + " attempt(s)";
}

}  // namespace

int AskCommand(int argc, char** argv) {
  const bool option = argc == 1 && argv[0][0] == '-' && std::string_view(argv[0]) != "-";
  if (argc != 1 || option) {
    return Fail("give the question as one argument (or - to read it from standard input)", 2);
  }
  std::string question = argv[0];
  if (question == "-") {
    std::stringstream in;
    in << std::cin.rdbuf();
    question = in.str();
  }
  auto config = LoadConfig([](const char* name) { return std::getenv(name); });
  if (!config.ok()) return Fail(config.status().message(), 2);
  SetupLogging("warn", config->log_format);
  auto model_config = LoadModelConfig(*config);
  if (!model_config.ok()) return Fail(model_config.status().message(), 2);
  if (!model_config->configured()) {
    return Fail(
        "no model is configured: set LLM_PROVIDER (openai or gemini), LLM_MODEL, "
        "LLM_BASE_URL and LLM_API_KEY (docs/agent.md \"The agent loop\")",
        2);
  }
  auto local = LocalService::Create(*config);
  if (!local.ok()) return Fail(local.status().message(), 2);
  ExecutionService& service = (*local)->service();
  auto model = llm::MakeProvider((*local)->io().get_executor(), *model_config);
  ProgramRunner runner(service, nullptr);
  SolveLoop solver(*model, runner);
  SandboxTools tools(runner, &solver);

  int exit_code = 1;
  RoundTripHooks hooks;
  hooks.calling = [](const llm::ToolCall& call) {
    std::fprintf(stderr, "[%s %s]\n", call.name.c_str(), call.arguments_json.c_str());
  };
  hooks.returned = [](const llm::ToolCall& call, const ToolOutcome& outcome) {
    std::fprintf(stderr, "[%s: %s]\n", call.name.c_str(), Summary(outcome).c_str());
  };
  asio::co_spawn((*local)->io(),
                 [&]() -> asio::awaitable<void> {
                   co_await service.ProbeLanguages();
                   std::vector<llm::ToolDeclaration> offered{
                       SolveTaskDeclaration(service.languages(), service.config())};
                   auto answer = co_await AskWithTools(*model, tools, offered, question, hooks);
                   if (auto* e = std::get_if<llm::ModelError>(&answer)) {
                     exit_code = Fail("the model failed: " + e->message, 1);
                   } else {
                     std::printf("%s\n", std::get<std::string>(answer).c_str());
                     exit_code = 0;
                   }
                 },
                 asio::detached);
  (*local)->io().run();
  return exit_code;
}

}  // namespace ci::daemon
