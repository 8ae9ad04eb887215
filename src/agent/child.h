// What a process the agent forks needs before its exec (an exec's program, the fork server):
// NUL-terminated argv and envp over strings that outlive the exec, and the signal state of a
// fresh process (the agent blocks SIGCHLD for its signalfd and ignores SIGPIPE).
#pragma once

#include <signal.h>

#include <string>
#include <vector>

namespace ci::agent {

struct ExecVectors {
  std::vector<char*> argv, envp;
};

inline ExecVectors VectorsOf(const std::vector<std::string>& argv,
                             const std::vector<std::string>& env) {
  ExecVectors v;
  for (const auto& a : argv) v.argv.push_back(const_cast<char*>(a.c_str()));
  v.argv.push_back(nullptr);
  for (const auto& kv : env) v.envp.push_back(const_cast<char*>(kv.c_str()));
  v.envp.push_back(nullptr);
  return v;
}

// In the child, before its exec: every disposition the default, whatever the agent ignores
// (SIGPIPE) or inherited ignored (an ignored signal stays ignored through exec).
inline void ResetSignals() {
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

}  // namespace ci::agent
