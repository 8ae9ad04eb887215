// A fresh process's signal state, for a child before its exec (or before it runs a program
// without one): what its parent ignores would otherwise stay ignored through exec.
#pragma once

#include <signal.h>

namespace ci {

// Every disposition the default and nothing blocked. glibc keeps 32 and 33 (its own) as they are.
inline void ResetSignalState() {
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

}  // namespace ci
