#include "daemon/service/python_program.h"

#include "daemon/service/service_programs.h"

namespace ci::daemon {
// The programs: python_driver.py and python_fork_server.py (their comments say how they run).

std::string WithRichResults(std::string_view program) {
  constexpr std::string_view kPlaceholder = "None  # @rich_results.py@";
  std::string literal = "'";
  for (char c : programs::kRichResults) {
    if (c == '\\' || c == '\'') literal += '\\';
    literal += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  literal += "'";
  std::string out(program);
  for (size_t at = out.find(kPlaceholder); at != std::string::npos;
       at = out.find(kPlaceholder, at + literal.size())) {
    out.replace(at, kPlaceholder.size(), literal);
  }
  return out;
}

std::string_view PythonDriver() {
  static const std::string driver = WithRichResults(programs::kPythonDriver);
  return driver;
}

// The driver's own, and rich_results.py's.
std::vector<std::string> PythonDriverModules() {
  return {"ast", "math", "resource", "stat", "base64", "io", "json"};
}

std::vector<std::string> PythonCompiledAhead() {
  return {std::string(PythonDriver()), std::string(programs::kRichResults)};
}

std::vector<std::string> PythonZygoteArgv(const std::vector<std::string>& warm_imports) {
  std::vector<std::string> argv = {"python3", "-c", std::string(programs::kPythonForkServer)};
  argv.insert(argv.end(), warm_imports.begin(), warm_imports.end());
  return argv;
}

std::vector<std::string> PythonPrestartArgv(const std::vector<std::string>& warm_imports) {
  std::vector<std::string> argv = {"python3", "-c", std::string(PythonDriver())};
  argv.insert(argv.end(), warm_imports.begin(), warm_imports.end());
  return argv;
}

}  // namespace ci::daemon
