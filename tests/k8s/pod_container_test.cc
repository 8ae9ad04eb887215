// ExactStdinArgv: v4 exec cannot close stdin, so the command must stop reading after exactly
// the bytes written. Run under the real bash with a stdin that never ends by itself.
#include "k8s/pod_container.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace ci::k8s {
namespace {

// Runs argv with `input` on a stdin pipe that is kept open (as a v4 exec's is), returns stdout.
std::string RunWithOpenStdin(const std::vector<std::string>& argv, const std::string& input) {
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execvp(a[0], a.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  if (write(in[1], input.data(), input.size()) != static_cast<ssize_t>(input.size())) {
    return "write failed";
  }
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  close(out[0]);
  close(in[1]);  // only now: the command ended without it
  int status = 0;
  waitpid(pid, &status, 0);
  return got + "|exit=" + std::to_string(WEXITSTATUS(status));
}

TEST(ExactStdinArgv, TheCommandReadsExactlyTheBytesAndThenEof) {
  // wc -c counts to EOF: it ends although the pipe stays open, having read exactly 5 bytes.
  auto argv = ExactStdinArgv({"bash", "-c", "wc -c; exit 3"}, 5);
  EXPECT_EQ(RunWithOpenStdin(argv, "hello, and more that is not the program's"), "5\n|exit=3");
}

TEST(ExactStdinArgv, ArgumentsReachTheCommandUnchanged) {
  auto argv = ExactStdinArgv({"printf", "%s|", "a b", "$HOME", "'\""}, 1);
  EXPECT_EQ(RunWithOpenStdin(argv, "x"), "a b|$HOME|'\"||exit=0");
}

TEST(ExactStdinArgv, BinaryInputPassesWhole) {
  std::string input("\0\1\2\xff\n", 5);
  input += std::string(100000, 'z');  // more than a pipe holds
  auto argv = ExactStdinArgv({"bash", "-c", "head -c 5 | od -An -tx1; wc -c"}, input.size());
  EXPECT_EQ(RunWithOpenStdin(argv, input + "tail"), " 00 01 02 ff 0a\n100000\n|exit=0");
}

}  // namespace
}  // namespace ci::k8s
