// Runs a program in a directory and collects what it printed, for tests that run a real
// interpreter or shell on the host (the sandbox's scripts, the Python driver).
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace ci::testing_support {

struct Ran {
  std::string out;  // stdout, and stderr too with `with_stderr`
  int status = -1;  // exit status; -1 for a death by signal
};

// `argv` (argv[0] found on PATH) with `dir` as its working directory and stdin at its end; no
// descriptor but 0-2 reaches it.
inline Ran RunIn(const std::string& dir, const std::vector<std::string>& argv,
                 bool with_stderr = false) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_RDONLY);
    if (::chdir(dir.c_str()) != 0 || ::dup2(null, 0) != 0 || ::dup2(out[1], 1) != 1 ||
        (with_stderr && ::dup2(out[1], 2) != 2)) {
      ::_exit(126);
    }
    ::close_range(3, ~0U, 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(out[1]);
  Ran ran;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) ran.out.append(buf, n);
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) ran.status = WEXITSTATUS(status);
  return ran;
}

}  // namespace ci::testing_support
