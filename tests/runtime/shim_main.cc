// Test-only stand-in for `code-interpreter shim` (and `zygote`): the runtime tests pass this binary
// as LocalExecutorOptions::shim_binary.
#include <string_view>

#include "runtime/daemon/local_executor.h"
#include "runtime/parent/fork_server.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "fork") return ci::runtime::ZygoteMain(argc, argv);
  return ci::runtime::ShimMain(argc, argv);
}
