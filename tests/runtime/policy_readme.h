// The denied list of policies/README.md, read by the tests so the README cannot drift from what
// is tested: the names in backticks between <!-- denied:NAME --> and <!-- /denied -->.
#pragma once

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace ci::testing_support {

// CI_POLICIES_DIR in the environment wins over the source tree's path (as_user.sh copies the
// folder where an unprivileged user can read it).
inline std::string ReadPolicyFile(const std::string& name) {
  const char* dir = std::getenv("CI_POLICIES_DIR");
  std::ifstream in(std::string(dir != nullptr ? dir : CI_POLICIES_DIR) + "/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline std::vector<std::string> DeniedInReadme(const std::string& profile) {
  const std::string text = ReadPolicyFile("README.md");
  const std::string begin = "<!-- denied:" + profile + " -->";
  size_t from = text.find(begin);
  size_t to = text.find("<!-- /denied -->", from);
  if (from == std::string::npos || to == std::string::npos) return {};
  std::vector<std::string> names;
  std::istringstream table(text.substr(from + begin.size(), to - from - begin.size()));
  std::string line;
  const std::regex name("`([a-z_0-9]+)`");
  while (std::getline(table, line)) {
    // Only the "system calls" column (the second): the "why" column may mention other names.
    size_t c1 = line.find('|', 1), c2 = line.find('|', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) continue;
    std::string cell = line.substr(c1, c2 - c1);
    for (std::sregex_iterator it(cell.begin(), cell.end(), name), end; it != end; ++it) {
      names.push_back((*it)[1]);
    }
  }
  return names;
}

}  // namespace ci::testing_support
