#include "agent/recycle.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/session_kill.h"

namespace ci::agent {

bool KillAndReapEverything(std::string* error, pid_t* spared) {
  for (int round = 0; round < 500; ++round) {  // 5 s
    if (*spared > 0) {
      KillAllBut(*spared);
    } else {
      ::kill(-1, SIGKILL);  // everything this user may signal; never the namespace's PID 1
    }
    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      // The spared process died: its pid is free for any process to take, so nothing is spared.
      if (pid == *spared) *spared = 0;
    }
    if (OnlyThisProcessLeft(*spared)) return true;
    ::usleep(10'000);
  }
  *error = "processes were still running 5 s after SIGKILL";
  return false;
}

}  // namespace ci::agent
