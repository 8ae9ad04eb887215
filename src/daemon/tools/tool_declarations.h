// The function declarations of the sandbox's tools, written for a model: what the sandbox has
// and has not (no network, the installed packages, the limits), so that the programs a model
// writes for it can work. GET /v1/tools, MCP's tools/list and `code-interpreter ask` use them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/config/config.h"
#include "daemon/service/languages.h"
#include "llm/conversation.h"

namespace ci::daemon {

inline constexpr std::string_view kExecuteCode = "execute_code";
inline constexpr std::string_view kSolveTask = "solve_task";

// What every program meets (no network, the packages, the limits), in the words a model needs
// to write one that works: part of each declaration and of the agent loop's instructions.
std::string SandboxFacts(const std::vector<Language>& languages, const Config& config);

// execute_code {code, language, stdin, timeout_ms}: runs a program the caller wrote.
llm::ToolDeclaration ExecuteCodeDeclaration(const std::vector<Language>& languages,
                                            const Config& config);
// solve_task {detailedDescription, language}: a model writes the program and fixes it until it
// runs (the agent loop).
llm::ToolDeclaration SolveTaskDeclaration(const std::vector<Language>& languages,
                                          const Config& config);

enum class ToolFormat { kOpenAi, kGemini };
// "openai" | "gemini"; nullopt for anything else.
std::optional<ToolFormat> ParseToolFormat(std::string_view name);

// The declarations as a provider's request takes them, in an object a client pastes into its
// request body: openai {"tools": [{"type": "function", "function": {...}}]}, gemini {"tools":
// [{"functionDeclarations": [...]}]} (Gemini's schema: uppercase types).
std::string ToolsJson(ToolFormat format, const std::vector<llm::ToolDeclaration>& tools);

}  // namespace ci::daemon
