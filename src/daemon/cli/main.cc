// code-interpreter: one binary, several subcommands (docs/architecture.md "Subcommands").
#include <cstdio>
#include <string_view>

#include "daemon/cli/cli.h"
#include "daemon/cli/doctor.h"
#include "daemon/cli/pid1_init.h"
#include "runtime/daemon/local_executor.h"
#include "runtime/parent/fork_server.h"

namespace {

constexpr const char* kUsage =
    "usage: code-interpreter [serve]             run the daemon (configured by environment)\n"
    "       code-interpreter run [--language L] [--timeout-ms N] (-c CODE | FILE | -)\n"
    "                                            run one program in a local sandbox\n"
    "       code-interpreter ask QUESTION        a model answers, running programs for it\n"
    "       code-interpreter doctor              check the host for sandboxes (exit 1 on FAIL)\n"
    "       code-interpreter version             print the version\n";

}  // namespace

int main(int argc, char** argv) {
  std::string_view cmd = argc > 1 ? argv[1] : "serve";
  // The shim is this same binary re-executed by the daemon to build a sandbox.
  if (cmd == "shim") return ci::runtime::ShimMain(argc, argv);
  // The fork server: Python loaded once, a shim forked per sandbox
  // (src/runtime/parent/fork_server.h).
  if (cmd == "fork") return ci::runtime::ZygoteMain(argc, argv);
  if (cmd == "serve") {
    ci::daemon::BecomeInitIfPid1();  // a container's entrypoint: reap orphans, forward signals
    return ci::daemon::Serve();
  }
  if (cmd == "run") return ci::daemon::RunCommand(argc - 2, argv + 2);
  if (cmd == "ask") return ci::daemon::AskCommand(argc - 2, argv + 2);
  if (cmd == "doctor") return ci::daemon::DoctorCommand(argc - 2, argv + 2);
  if (cmd == "version" || cmd == "--version") {
    std::printf("code-interpreter %s\n", CI_VERSION);
    return 0;
  }
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::fprintf(stderr, "code-interpreter: unknown command '%s'\n%s", argv[1], kUsage);
  return 2;
}
