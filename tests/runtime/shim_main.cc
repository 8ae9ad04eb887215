// Test-only stand-in for `code-interpreter shim`: the runtime tests pass this binary as
// LocalExecutorOptions::shim_binary.
#include "runtime/local_executor.h"

int main(int argc, char** argv) { return ci::runtime::ShimMain(argc, argv); }
