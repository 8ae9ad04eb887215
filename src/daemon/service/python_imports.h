// Which interpreter a Python program needs, judged from its source before it runs: one with
// WARM_IMPORTS loaded, or a lean one (docs/performance.md "Lean interpreters").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ci::daemon {

// The top-level modules the import statements of `code` name, in order ("a" for `import a.b`
// and `from a.b import c`; "." for a relative import). Strings and comments are skipped.
std::vector<std::string> ImportedModules(std::string_view code);

// Whether `code` may import one of `warm` (top-level names) or anything outside Python's
// standard library, which may import one in turn: an import statement naming such a module, a
// relative import, or a way to import that the statements do not show (`__import__`,
// `importlib`, `exec`, `eval`, `runpy`, `pickle`, ... anywhere in the text). False only when
// the program surely imports none: then it runs in the lean interpreter, and a module it
// imports some other way after all is loaded then, as in any Python.
bool MayImportWarmModules(std::string_view code, const std::vector<std::string>& warm);

}  // namespace ci::daemon
