#include "daemon/tools/tool_declarations.h"

#include <fmt/format.h>

#include "core/json.h"
#include "llm/gemini_schema.h"

namespace ci::daemon {
namespace {

std::string LanguageList(const std::vector<Language>& languages) {
  std::string out;
  for (const Language& l : languages) {
    if (!out.empty()) out += ", ";
    out += l.name;
    if (!l.version.empty()) out += " " + l.version;
  }
  return out;
}

void WriteLanguageProperty(JsonWriter& w, const std::vector<Language>& languages) {
  w.Key("language");
  w.StartObject();
  WriteField(w, "type", "string");
  w.Key("enum");
  w.StartArray();
  for (const Language& l : languages) WriteString(w, l.name);
  w.EndArray();
  WriteField(w, "description", "The program's language (default python).");
  w.EndObject();
}

std::string ExecuteCodeParameters(const std::vector<Language>& languages, const Config& config) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "type", "object");
    w.Key("properties");
    w.StartObject();
    w.Key("code");
    w.StartObject();
    WriteField(w, "type", "string");
    WriteField(w, "description", "The whole program: a complete file, run as it is.");
    w.EndObject();
    WriteLanguageProperty(w, languages);
    w.Key("stdin");
    w.StartObject();
    WriteField(w, "type", "string");
    WriteField(w, "description", "Text given to the program on standard input.");
    w.EndObject();
    w.Key("timeout_ms");
    w.StartObject();
    WriteField(w, "type", "integer");
    WriteField(w, "description",
               fmt::format("Wall-clock limit in milliseconds, 1 to {} (default 2000; Go's "
                           "build counts, so give Go programs 10000 or more).",
                           config.max_exec_timeout_ms));
    w.EndObject();
    w.EndObject();
    w.Key("required");
    w.StartArray();
    w.String("code");
    w.EndArray();
    w.EndObject();
  });
}

std::string SolveTaskParameters(const std::vector<Language>& languages) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "type", "object");
    w.Key("properties");
    w.StartObject();
    w.Key("detailedDescription");
    w.StartObject();
    WriteField(w, "type", "string");
    WriteField(w, "description",
               "The task, complete and self-contained: every number, text and rule the program "
               "needs, and what exactly it should print.");
    w.EndObject();
    WriteLanguageProperty(w, languages);
    w.EndObject();
    w.Key("required");
    w.StartArray();
    w.String("detailedDescription");
    w.EndArray();
    w.EndObject();
  });
}

}  // namespace

std::string SandboxFacts(const std::vector<Language>& languages, const Config& config) {
  return fmt::format(
      "Each program runs alone in a fresh, isolated sandbox that is thrown away afterwards: no "
      "network access (nothing can be downloaded or installed), no state kept between calls. "
      "Languages: {}. Python has its standard library plus numpy, pandas, matplotlib and "
      "openpyxl; Go has its standard library only (no modules); JavaScript is Node.js without "
      "npm packages. Limits: {} MB of memory, {} s of CPU time, {} processes, {} bytes of "
      "output per stream. Read input from stdin and files in the working directory; print the "
      "answer to stdout.",
      LanguageList(languages), config.memory_limit_mb, config.cpu_time_limit_sec, config.pids_limit,
      config.max_output_bytes);
}

llm::ToolDeclaration ExecuteCodeDeclaration(const std::vector<Language>& languages,
                                            const Config& config) {
  return {std::string(kExecuteCode),
          "Runs a program and returns its stdout, stderr, exit code and verdict (ok, error, "
          "timeout, memory_limit, ...). " +
              SandboxFacts(languages, config),
          ExecuteCodeParameters(languages, config)};
}

llm::ToolDeclaration SolveTaskDeclaration(const std::vector<Language>& languages,
                                          const Config& config) {
  return {std::string(kSolveTask),
          "Solves a task by computation: a program is written for it, run, and corrected until "
          "it works; returns the program's output and every attempt. Use it for arithmetic, "
          "counting, data processing, or anything that needs exact computation rather than "
          "recall. " +
              SandboxFacts(languages, config),
          SolveTaskParameters(languages)};
}

std::optional<ToolFormat> ParseToolFormat(std::string_view name) {
  if (name == "openai") return ToolFormat::kOpenAi;
  if (name == "gemini") return ToolFormat::kGemini;
  return std::nullopt;
}

std::string ToolsJson(ToolFormat format, const std::vector<llm::ToolDeclaration>& tools) {
  return JsonText([&](JsonWriter& w) {
    auto declaration = [&](const llm::ToolDeclaration& t, const std::string& parameters) {
      w.StartObject();
      WriteField(w, "name", t.name);
      WriteField(w, "description", t.description);
      w.Key("parameters");
      w.RawValue(parameters.data(), parameters.size(), rapidjson::kObjectType);
      w.EndObject();
    };
    w.StartObject();
    WriteField(w, "format", format == ToolFormat::kOpenAi ? "openai" : "gemini");
    w.Key("tools");
    w.StartArray();
    if (format == ToolFormat::kOpenAi) {
      for (const auto& t : tools) {
        w.StartObject();
        WriteField(w, "type", "function");
        w.Key("function");
        declaration(t, t.parameters_json);
        w.EndObject();
      }
    } else {
      w.StartObject();
      w.Key("functionDeclarations");
      w.StartArray();
      for (const auto& t : tools) declaration(t, llm::GeminiSchema(t.parameters_json));
      w.EndArray();
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  });
}

}  // namespace ci::daemon
