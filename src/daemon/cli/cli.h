// Subcommands of the one binary: `serve` (the daemon), `run` (one program, no daemon).
#pragma once

namespace ci::daemon {

// The daemon: configuration from the environment, HTTP on HOST:PORT, SIGTERM/SIGINT shut down
// gracefully. Returns the process exit code.
int Serve();

// `code-interpreter run [--language L] [--timeout-ms N] (-c CODE | FILE | -)`: runs one program
// in a local sandbox, streams its output, exits with its exit code (124 on timeout, 128+N when
// killed by signal N). Standard input is passed to the program when it is not a terminal.
int RunCommand(int argc, char** argv);

}  // namespace ci::daemon
