// What to run for a request: the entrypoint file staged into /workspace and the argv that runs it,
// per language. Python gets the Jupyter-like last-line display of docs/api.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ci::daemon {

struct Program {
  std::string entrypoint;  // workspace-relative, e.g. "__main__.py"; reserved for user files
  std::vector<std::string> argv;
  // Python: the driver's go line (RunPayload::go), which says how to run the entrypoint and the
  // CPU limit; empty for the other languages.
  std::string go;
};

struct Language {
  std::string name;         // "python"
  std::string interpreter;  // absolute path inside the root filesystem, e.g. /usr/bin/python3
  std::string version;      // "3.11.2", probed in a sandbox at startup; empty until then
};

// The version number in an interpreter's `--version` output ("Python 3.11.2" -> "3.11.2").
std::string ParseVersion(std::string_view version_output);

// The languages whose interpreter exists under `rootfs` ("host" = this machine's /).
std::vector<Language> AvailableLanguages(const std::string& rootfs);

// Every language this daemon knows, for a backend whose root is an image this filesystem does not
// hold (docker, kubernetes; the daemon may run in a container without any interpreter): the
// startup probe keeps those that answer `--version` in a sandbox.
std::vector<Language> KnownLanguages();

// 422 text for an unknown or missing language names what is available.
Result<Program> BuildProgram(std::string_view language, bool last_line_interactive,
                             uint32_t cpu_time_sec, const std::vector<Language>& available);

// The Python driver run with `python3 -c` (exposed for tests).
std::string_view PythonDriver();

// A pre-started Python interpreter (SandboxSpec::prestart_argv): the driver, which imports
// `warm_imports` before it waits for its go.
std::vector<std::string> PythonPrestartArgv(const std::vector<std::string>& warm_imports);

// The fork server of Docker execution containers (SandboxSpec::zygote_argv, src/agent/zygote.h):
// Python with `warm_imports` imported once, forking the PythonPrestartArgv program per request.
std::vector<std::string> PythonZygoteArgv(const std::vector<std::string>& warm_imports);

// The modules the driver itself imports before the program runs: a fork server loads them with
// the warm imports, so a forked program does not import them again.
std::vector<std::string> PythonDriverModules();

}  // namespace ci::daemon
