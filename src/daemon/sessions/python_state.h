// A session's Python state saved to a file and restored in a new interpreter (issue 34): calls of
// the session's server (python_session.h) that carry an op instead of a cell.
//
//   request  {"op": "dump"|"load", "path": "/abs/path/in/the/sandbox", "timeout_ms": N}
//   answer   status 0 and one JSON line on stdout:
//            dump {"kept": [name...], "lost": [{"name", "why"}...], "bytes": N}
//            load {"kept": [name...], "lost": [{"name", "why"}...]}
//            status 1: {"error": "..."} (dump wrote nothing; load left the file and the names)
//
// Dump saves every global of the cells (the interpreter's own dunder names skipped) with dill when
// it is importable, else pickle: modules by name (re-imported), the rest by value with shared
// references kept, numpy's data out of band. Load restores them, unpickling inside the sandbox,
// and deletes the file. What does not pickle (sockets, open files, threads, generators, ...) or
// does not load is lost, by name with its reason; the others are kept. Flag 1 of the answer: the
// call's timeout interrupted it (as for a cell; a dump then writes nothing).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ci::daemon {

// RunPayload::call of a dump or a load (`op`) of the file at `path`, absolute in the sandbox.
std::string PythonStateRequest(std::string_view op, std::string_view path, int64_t timeout_ms);

struct PythonStateReport {
  std::vector<std::string> kept;
  std::vector<std::pair<std::string, std::string>> lost;  // name, why
  uint64_t bytes = 0;                                     // dump: the file's size
  std::string error;  // non-empty: the op failed (status 1); the rest is empty
};

// The answer's last non-empty stdout line (what a cell-like __reduce__ printed before it is
// skipped); an error when it is not such an answer.
Result<PythonStateReport> ParsePythonStateReport(std::string_view stdout_text);

}  // namespace ci::daemon
