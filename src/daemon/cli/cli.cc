#include "daemon/cli/cli.h"

#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "daemon/cli/local_service.h"
#include "daemon/cli/logging.h"
#include "daemon/config/config.h"
#include "daemon/service/execution_service.h"

namespace ci::daemon {
namespace {

struct RunArgs {
  std::string code;
  std::string language = "python";
  int64_t timeout_ms = 60000;
};

Result<RunArgs> ParseRunArgs(int argc, char** argv) {
  RunArgs a;
  bool have_code = false;
  for (int i = 0; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "-c") {
      const char* v = next();
      if (v == nullptr) return Status::Error("-c needs the code as its argument");
      a.code = v;
      have_code = true;
    } else if (arg == "--language") {
      const char* v = next();
      if (v == nullptr) return Status::Error("--language needs a value");
      a.language = v;
    } else if (arg == "--timeout-ms") {
      const char* v = next();
      char* end = nullptr;
      a.timeout_ms = v ? std::strtoll(v, &end, 10) : 0;
      if (v == nullptr || *end != '\0' || a.timeout_ms < 1) {
        return Status::Error("--timeout-ms needs a positive integer");
      }
    } else if (!have_code) {
      std::stringstream buf;
      if (arg == "-") {
        buf << std::cin.rdbuf();
      } else {
        std::ifstream in{std::string(arg), std::ios::binary};
        if (!in) return Status::Error("cannot read " + std::string(arg));
        buf << in.rdbuf();
      }
      a.code = buf.str();
      have_code = true;
    } else {
      return Status::Error("unexpected argument '" + std::string(arg) + "'");
    }
  }
  if (!have_code) return Status::Error("no program: give -c CODE, a FILE or - for standard input");
  return a;
}

int ExitCodeOf(const RunOutcome& run) {
  if (run.timed_out) return 124;  // as timeout(1)
  if (run.exit_code) return *run.exit_code;
  if (run.signal) return 128 + *run.signal;
  return 1;
}

}  // namespace

int RunCommand(int argc, char** argv) {
  auto args = ParseRunArgs(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "code-interpreter run: %s\n", args.status().message().c_str());
    return 2;
  }
  auto config = LoadConfig([](const char* name) { return std::getenv(name); });
  if (!config.ok()) {
    std::fprintf(stderr, "code-interpreter: %s\n", config.status().message().c_str());
    return 2;
  }
  SetupLogging("warn", config->log_format);
  auto local = LocalService::Create(*config);
  if (!local.ok()) {
    std::fprintf(stderr, "code-interpreter run: %s\n", local.status().message().c_str());
    return 2;
  }
  ExecutionService& service = (*local)->service();
  asio::io_context& io = (*local)->io();

  ExecuteRequest request;
  request.code = args->code;
  request.language = args->language;
  request.timeout_ms = args->timeout_ms;
  if (!isatty(STDIN_FILENO) && argc > 0 && std::string_view(argv[argc - 1]) != "-") {
    std::stringstream in;
    in << std::cin.rdbuf();
    request.stdin_data = in.str();
  }

  int exit_code = 1;
  auto plan = service.Plan(request, /*client=*/"");
  if (auto* err = std::get_if<ApiError>(&plan)) {
    std::fprintf(stderr, "code-interpreter run: %s\n", err->detail.c_str());
    exit_code = 2;
  } else {
    OutputSink sink = [](StreamKind kind, std::string_view data) {
      std::FILE* f = kind == StreamKind::kStdout ? stdout : stderr;
      std::fwrite(data.data(), 1, data.size(), f);
      std::fflush(f);
    };
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          auto outcome = co_await service.Execute(std::get<ExecutionPlan>(plan), sink,
                                                  [](std::function<void()>) {});
          if (auto* e = std::get_if<ApiError>(&outcome)) {
            std::fprintf(stderr, "code-interpreter run: execution failed (%s)\n",
                         e->detail.c_str());
          } else {
            const auto& run = std::get<ExecutionResult>(outcome).run;
            if (run.timed_out) std::fprintf(stderr, "code-interpreter run: timed out\n");
            exit_code = ExitCodeOf(run);
          }
        },
        asio::detached);
    io.run();
  }
  return exit_code;
}

}  // namespace ci::daemon
