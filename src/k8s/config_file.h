// Reading the small files a Kubernetes configuration names (kubeconfig, token, CA, certificate,
// key, namespace), with the error naming the file.
#pragma once

#include <sys/stat.h>

#include <string>

#include "core/status.h"

namespace ci::k8s {

// Files above this are refused: every file here is a few KiB, and a daemon should not read a
// multi-gigabyte "kubeconfig" into memory because a path was wrong.
inline constexpr size_t kMaxConfigFileBytes = 4 << 20;

// The whole file; `st` (when given) gets the fstat of what was read, so a caller can tell a
// later replacement from this content. "reading /p: No such file or directory".
Result<std::string> ReadConfigFile(const std::string& path, struct stat* st = nullptr);

}  // namespace ci::k8s
