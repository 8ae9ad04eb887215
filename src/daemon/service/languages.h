// What to run for a request, per language: the entrypoint file staged into /workspace, the files
// staged next to it, and the argv that runs it. Python's driver is python_program.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ci::daemon {

// A file the daemon stages next to the entrypoint (Go's go.mod), unless the request stages one
// at the same path. Like a staged input, it is an output only when the program changed it.
struct SupportFile {
  std::string path;  // workspace-relative
  std::string content;
};

struct Program {
  std::string entrypoint;  // workspace-relative, e.g. "__main__.py"; reserved for user files
  std::vector<std::string> argv;
  // Python: the driver's go line (RunPayload::go), which says how to run the entrypoint and the
  // CPU limit; empty for the other languages.
  std::string go;
  std::vector<SupportFile> support_files;
};

struct Language {
  std::string name;         // "python"
  std::string interpreter;  // absolute path inside the root filesystem, e.g. /usr/bin/python3
  std::string version;      // "3.11.2", probed in a sandbox at startup; empty until then
  std::string version_arg = "--version";  // what makes `interpreter` print its version
};

// Where Go's standard library, compiled without cgo, is inside the sandbox's root
// (scripts/go-std.sh builds it there, on the host and in the executor image).
inline constexpr std::string_view kGoStdDir = "/usr/local/lib/code-interpreter/go-std";

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

}  // namespace ci::daemon
