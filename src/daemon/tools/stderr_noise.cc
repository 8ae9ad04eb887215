#include "daemon/tools/stderr_noise.h"

#include <regex>

namespace ci::daemon {
namespace {

const std::regex& PythonWarning() {
  static const std::regex re(R"(^.*:\d+: \w*Warning: .*$)");
  return re;
}

const std::regex& NodeWarning() {
  static const std::regex re(R"(^\(node:\d+\) \w*Warning: .*$|^\(Use `node --trace-.*$)");
  return re;
}

const std::regex& GoInfo() {
  static const std::regex re(
      R"(^go: (downloading|finding|extracting|creating|added|upgraded|to add|warning:) .*$)");
  return re;
}

}  // namespace

std::string WithoutNoise(std::string_view stderr_text) {
  std::string kept;
  bool after_python_warning = false;
  size_t pos = 0;
  while (pos < stderr_text.size()) {
    size_t end = stderr_text.find('\n', pos);
    if (end == std::string_view::npos) end = stderr_text.size();
    std::string line(stderr_text.substr(pos, end - pos));
    pos = end + 1;
    // The warnings module prints the offending source line under the warning, indented by 2.
    if (after_python_warning && line.starts_with("  ")) {
      after_python_warning = false;
      continue;
    }
    after_python_warning = std::regex_match(line, PythonWarning());
    if (after_python_warning || std::regex_match(line, NodeWarning()) ||
        std::regex_match(line, GoInfo())) {
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines say nothing
    kept += line;
    kept += '\n';
  }
  return kept;
}

}  // namespace ci::daemon
