// Safe file access inside /workspace for init (sandbox side). The program has run as the same
// uid and may have planted symlinks anywhere, so no path is ever resolved in one go: every
// component is opened relative to its parent with O_NOFOLLOW.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "runtime/kernel/sys_error.h"

namespace ci::runtime {

// True for "a/b.txt"; false for "", "/x", "a//b", "../x", "a/./b", names with NUL.
bool IsSafeRelativePath(const std::string& path);

// Creates `path` below root_dir (parents 0755, the file 0644, O_EXCL) and returns a write fd.
SysError CreateFileBelow(int root_dir, const std::string& path, int* fd);

// Visits every regular file below root_dir (depth-first, never following symlinks, skipping
// devices, fifos and sockets). `visit` gets the relative path, an open read-only fd and the size;
// it returns false to stop the walk. Directories nested deeper than kMaxWalkDepth are not
// entered (the walk holds an fd per level); *pruned is set when one was left out.
constexpr int kMaxWalkDepth = 64;
using FileVisitor = std::function<bool(const std::string& path, int fd, uint64_t size)>;
SysError WalkRegularFiles(int root_dir, const FileVisitor& visit, bool* pruned = nullptr);

}  // namespace ci::runtime
