#include "daemon/service/python_program.h"

#include "daemon/service/service_programs.h"

namespace ci::daemon {
// The programs: python_driver.py and python_fork_server.py (their comments say how they run).

std::string_view PythonDriver() { return programs::kPythonDriver; }

std::vector<std::string> PythonDriverModules() { return {"ast", "math", "resource", "stat"}; }

std::vector<std::string> PythonZygoteArgv(const std::vector<std::string>& warm_imports) {
  std::vector<std::string> argv = {"python3", "-c", std::string(programs::kPythonForkServer)};
  argv.insert(argv.end(), warm_imports.begin(), warm_imports.end());
  return argv;
}

std::vector<std::string> PythonPrestartArgv(const std::vector<std::string>& warm_imports) {
  std::vector<std::string> argv = {"python3", "-c", std::string(programs::kPythonDriver)};
  argv.insert(argv.end(), warm_imports.begin(), warm_imports.end());
  return argv;
}

}  // namespace ci::daemon
