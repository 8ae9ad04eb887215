// Validation of user-supplied workspace paths (the `path` of a staged file).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace ci::daemon {

// Normalizes a relative workspace path: empty and "." components are dropped, so
// "./a//b/./c.txt" becomes "a/b/c.txt". The error messages are the API's 422 texts (see
// docs/api.md, "Files in the workspace") and are returned verbatim in `detail`.
// `entrypoint_reserved` is true when code is staged as the root-level `__main__.py`.
Result<std::string> NormalizeWorkspacePath(std::string_view path, bool entrypoint_reserved);

}  // namespace ci::daemon
