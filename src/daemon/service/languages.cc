#include "daemon/service/languages.h"

#include <unistd.h>

#include "daemon/service/python_program.h"
#include "daemon/service/service_programs.h"

namespace ci::daemon {
namespace {

struct KnownLanguage {
  std::string_view name;
  std::string_view interpreter;
  std::string_view entrypoint;
  std::string_view version_arg;
};
constexpr KnownLanguage kKnown[] = {
    {"python", "/usr/bin/python3", "__main__.py", "--version"},
    {"bash", "/bin/bash", "__main__.sh", "--version"},
    {"javascript", "/usr/bin/node", "__main__.js", "--version"},
    {"go", "/usr/bin/go", "main.go", "version"},
};

// Go: the workspace's package built, then the program in its place (exec: its exit status and
// signals are the run's). The build gets everything it needs in the sandbox's /tmp (a cache of
// its own, empty: only the program's packages compile) and the standard library from kGoStdDir;
// no cgo (no C compiler in the sandbox), no module downloads (no network: an import outside the
// standard library fails naming the package, and the line after it says why), no go.env of the
// user's, at most 2 threads per tool (the pids limit counts threads). `-s -w`: no symbol table or
// DWARF, which halves the link; panics still name functions and lines. These settings are
// scripts/go-std.sh's too: any difference makes the precompiled library stale.
//
// The usual program, main.go alone in our module without build constraints, embeds or cgo, is
// compiled and linked by the toolchain's compile and link directly, against an importcfg of the
// precompiled library: the same result without the go command's package loading and staleness
// hashing (about a third of a hello world's build). Anything else gets `go build`.
std::string GoBuildAndRun(std::string_view go) {
  // @GO@: the go command; @STD@: kGoStdDir. The fast path's conditions, in order: main.go is
  // the only .go file of the workspace (none in subdirectories either), go.mod is ours, main.go
  // has no build constraint, embed or import of "C". The compiler reports on stdout: both
  // streams of the tools go to the build's log, shown on stderr.
  std::string script(programs::kGoBuildAndRun);  // go_build_and_run.sh
  for (auto [placeholder, value] :
       {std::pair<std::string_view, std::string_view>{"@GO@", go}, {"@STD@", kGoStdDir}}) {
    for (size_t at = script.find(placeholder); at != std::string::npos;
         at = script.find(placeholder, at + value.size())) {
      script.replace(at, placeholder.size(), value);
    }
  }
  return script;
}

// The module the program builds in, when the request stages no go.mod of its own.
constexpr std::string_view kGoMod = "module sandbox\n\ngo 1.19\n";

Language ToLanguage(const KnownLanguage& k) {
  return {std::string(k.name), std::string(k.interpreter), "", std::string(k.version_arg)};
}

}  // namespace

std::string ParseVersion(std::string_view out) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  for (size_t i = 0; i < out.size(); ++i) {
    if (!digit(out[i]) || (i > 0 && (digit(out[i - 1]) || out[i - 1] == '.'))) continue;
    size_t end = i, dots = 0;
    while (end < out.size() &&
           (digit(out[end]) || (out[end] == '.' && end + 1 < out.size() && digit(out[end + 1])))) {
      dots += out[end] == '.';
      ++end;
    }
    if (dots > 0) return std::string(out.substr(i, end - i));
  }
  return "";
}

std::vector<Language> AvailableLanguages(const std::string& rootfs) {
  std::vector<Language> out;
  std::string prefix = rootfs == "host" ? "" : rootfs;
  for (const auto& k : kKnown) {
    if (access((prefix + std::string(k.interpreter)).c_str(), X_OK) == 0) {
      out.push_back(ToLanguage(k));
    }
  }
  return out;
}

std::vector<Language> KnownLanguages() {
  std::vector<Language> out;
  for (const auto& k : kKnown) out.push_back(ToLanguage(k));
  return out;
}

Result<Program> BuildProgram(std::string_view language, bool last_line_interactive,
                             uint32_t cpu_time_sec, const std::vector<Language>& available) {
  const KnownLanguage* known = nullptr;
  for (const auto& k : kKnown) {
    if (k.name == language) known = &k;
  }
  bool installed = false;
  std::string names;
  for (const auto& l : available) {
    names += (names.empty() ? "" : ", ") + l.name;
    if (l.name == language) installed = true;
  }
  if (known == nullptr || !installed) {
    return Status::Error("Unsupported language '" + std::string(language) +
                         "'. Available: " + names + ".");
  }
  Program p;
  p.entrypoint = std::string(known->entrypoint);
  if (language == "python") {
    p.argv = PythonPrestartArgv({});
    p.go = last_line_interactive ? "interactive " : "script ";
    p.go += std::to_string(cpu_time_sec) + "\n";
  } else if (language == "go") {
    p.argv = {"/bin/sh", "-c", GoBuildAndRun(known->interpreter)};
    p.support_files.push_back({"go.mod", std::string(kGoMod)});
  } else {
    p.argv = {std::string(known->interpreter), "/workspace/" + p.entrypoint};
  }
  return p;
}

}  // namespace ci::daemon
