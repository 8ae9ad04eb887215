// The fork server's Python (src/runtime/README.md "Fork server"): libpython loaded into the zygote
// with the warm imports done, so that a sandbox's program `python3 -c CODE ...` runs in init's
// forked child without starting an interpreter: the child already holds one. Loaded with dlopen,
// only in the zygote: the binary does not link libpython (the daemon's images have none).
#pragma once

#include <string>
#include <vector>

#include "runtime/kernel/sys_error.h"

namespace ci::runtime {

// Loads libpython (the one /usr/bin/python3 names: python3.X -> libpython3.X.so.1.0), starts the
// interpreter in this process with `env` as its environment and imports `modules` with their
// output going nowhere. A module that fails to import is skipped (the program's own import says
// why). `sources` are compiled once: a program `python3 -c SOURCE` with one of them runs its code
// object.
SysError LoadEmbeddedPython(const std::vector<std::string>& env,
                            const std::vector<std::string>& modules,
                            const std::vector<std::string>& sources);

// Around the zygote's fork of a shim (Python's own fork bookkeeping; the program's fork later
// completes it in the child).
void BeforeEmbeddedPythonFork();
void AfterEmbeddedPythonFork();

// Whether this process holds an interpreter (it is the zygote or a fork of it) that runs argv:
// `python3 -c CODE [ARGS...]` with exactly the zygote's environment.
bool EmbeddedPythonRuns(char** argv, char** envp);

// In a fresh fork, with the program's stdio, ids, limits and cwd in place: runs argv as
// `python3 -c` would and exits with its status.
[[noreturn]] void RunEmbeddedPython(char** argv);

}  // namespace ci::runtime
