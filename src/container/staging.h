// The run's files into the container's workspace: small ones inline in the program's exec argv
// (InlineFiles, written by sandbox_shell.h's InlineFilesArgv), the others as a tar written into
// `tar -x` over an exec of its own (StageFiles). README "One execution", step 2.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <optional>
#include <string>
#include <vector>

#include "container/container_exec.h"
#include "core/executor.h"
#include "core/status.h"

namespace ci::container {

// Files that may travel in the program's exec argv instead of a tar exec (top-level, UTF-8
// without NUL, 64 KiB together): "path, content" pairs, or nullopt when they must go by tar.
std::optional<std::vector<std::string>> InlineFiles(const std::vector<StagedFile>& files);

// Writes the files as a tar into `tar -x` running in the workspace (owned by the sandbox user
// 65532, folders created as needed); its failure names tar's message.
asio::awaitable<Status> StageFiles(const Container& c, const std::vector<StagedFile>& files,
                                   ExecHold hold);

}  // namespace ci::container
