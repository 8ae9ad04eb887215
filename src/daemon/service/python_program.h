// Python's programs: the driver that runs a request's code (with the Jupyter-like last-line
// display of docs/api.md), the pre-started interpreter and the fork server that run it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ci::daemon {

// `program` (Python source) with its placeholder `None  # @rich_results.py@` replaced by
// rich_results.py's source as a string literal: the one copy of the rich results' code that
// every program running Python code compiles.
std::string WithRichResults(std::string_view program);

// The Python driver run with `python3 -c` (exposed for tests).
std::string_view PythonDriver();

// A pre-started Python interpreter (SandboxSpec::prestart_argv): the driver, which imports
// `warm_imports` before it waits for its go.
std::vector<std::string> PythonPrestartArgv(const std::vector<std::string>& warm_imports);

// The fork server of Docker execution containers (SandboxSpec::zygote_argv,
// src/agent/python_fork_server.h): Python with `warm_imports` imported once, forking the
// PythonPrestartArgv program per request.
std::vector<std::string> PythonZygoteArgv(const std::vector<std::string>& warm_imports);

// The modules the driver itself imports before the program runs: a fork server loads them with
// the warm imports, so a forked program does not import them again.
std::vector<std::string> PythonDriverModules();

// The sources a fork server compiles once for its programs: the driver and the rich results'
// code it runs (python_driver.py finds the latter by its text).
std::vector<std::string> PythonCompiledAhead();

}  // namespace ci::daemon
