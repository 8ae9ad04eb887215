// Files written by the agent itself (kWriteFiles): a program's code before the go to a program
// started ahead or forked, where an exec of a shell to write them cost a fork, an exec and a
// round trip per execution. The agent runs as the sandbox user, so it can write only what the
// program could.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ci::agent {

// Writes each file into `dir` (created or truncated, mode 0666 less the umask, as a shell's `>`
// does), refusing names that are not one component and symbolic links in their place. Returns
// why not, naming the file, or an empty string when all were written.
std::string WriteFiles(const std::string& dir,
                       const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace ci::agent
