#include "daemon/files/workspace_paths.h"

#include <vector>

namespace ci::daemon {
namespace {

// Linux limits (NAME_MAX, PATH_MAX). Checking them here turns an obscure ENAMETOOLONG while
// staging into a clear 422.
constexpr size_t kMaxComponentBytes = 255;
constexpr size_t kMaxPathBytes = 4096;

}  // namespace

Result<std::string> NormalizeWorkspacePath(std::string_view path, bool entrypoint_reserved) {
  // The order of the checks is part of the onyx contract: a path that breaks several rules gets
  // the message of the first one.
  if (!path.empty() && path.front() == '/') {
    return Status::Error("File paths must be relative.");
  }
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (part == "..") return Status::Error("File paths must not contain '..'.");
    if (!part.empty() && part != ".") parts.push_back(part);
    start = end + 1;
  }
  if (parts.empty()) return Status::Error("File path must not be empty.");

  std::string normalized;
  for (std::string_view part : parts) {
    if (!normalized.empty()) normalized.push_back('/');
    normalized.append(part);
  }
  if (entrypoint_reserved && normalized == "__main__.py") {
    return Status::Error("File path '__main__.py' is reserved for the execution entrypoint.");
  }

  // Stricter than onyx: a NUL would truncate the path at the syscall boundary, and control
  // characters (newlines in particular) make file names that break logs and listings.
  for (unsigned char c : normalized) {
    if (c < 0x20) return Status::Error("File path contains an invalid character.");
  }
  for (std::string_view part : parts) {
    if (part.size() > kMaxComponentBytes) {
      return Status::Error("File path component is too long.");
    }
  }
  if (normalized.size() > kMaxPathBytes) return Status::Error("File path is too long.");
  return normalized;
}

}  // namespace ci::daemon
