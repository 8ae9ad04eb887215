// Subcommands of the one binary: `serve` (the daemon), `run` (one program, no daemon), `ask` (a
// model answers, running programs for it).
#pragma once

namespace ci::daemon {

// The daemon: configuration from the environment, HTTP on HOST:PORT, SIGTERM/SIGINT shut down
// gracefully. Returns the process exit code.
int Serve();

// `code-interpreter run [--language L] [--timeout-ms N] (-c CODE | FILE | -)`: runs one program
// in a local sandbox, streams its output, exits with its exit code (124 on timeout, 128+N when
// killed by signal N). Standard input is passed to the program when it is not a terminal.
int RunCommand(int argc, char** argv);

// `code-interpreter ask "QUESTION"` (or - for standard input): sends the question to the model of
// LLM_PROVIDER... with the solve_task declaration, runs the agent loop in local sandboxes when the
// model calls it, sends the result back as the function response and prints the model's final
// answer. Each tool call is reported on stderr. Exit 0, 1 when the model failed, 2 for bad usage
// or configuration.
int AskCommand(int argc, char** argv);

}  // namespace ci::daemon
