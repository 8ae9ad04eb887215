// The Python fork server of an execution container (the agent's kZygote): an interpreter started
// once, with the pool's warm modules imported, that forks a program per execution, so each one
// pays a fork instead of Python's start (~40 ms of CPU on these machines). It outlives the
// container's recycles, so it is what a recycle checks most: it runs as the programs' user, and
// whatever a program could change of it (stopped, killed, its rlimits, priority, scheduling or
// CPU affinity) makes the agent replace it with a fresh one.
//
// Its channel is fd 3, a SOCK_SEQPACKET socket only the agent holds the other end of. Requests:
// "id\0cwd\0argv...\0\0env...\0" with the program's stdin, stdout and stderr (SCM_RIGHTS). It
// forks a child that leaves its session (setsid) and forks the program, reports the program's
// pid ("pid\0id\0pid") and exits, so the program is the agent's child to reap, as an exec's is.
// "ready" once its imports are done; "err\0id\0why" when a fork failed.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "agent/agent_wire.h"

namespace ci::agent {

class Zygote {
 public:
  struct Report {
    enum Kind { kReady, kPid, kError } kind = kReady;
    uint32_t id = 0;
    pid_t pid = 0;
    std::string why;
  };

  ~Zygote() { Close(); }

  // Starts `req` (argv and env as for an exec; its cwd) in a session of its own, stdio on
  // /dev/null; false with the reason when it could not be forked.
  bool Start(const ExecRequest& req, const std::vector<std::string>& env, std::string* error);
  bool running() const { return pid_ > 0 && sock_ >= 0; }
  pid_t pid() const { return pid_; }
  int fd() const { return sock_; }  // to poll; -1 when not running

  // Hands it the program of exec `id` (a python3 -c argv) with its stdio (copies are sent).
  bool Fork(uint32_t id, const ExecRequest& req, const std::vector<std::string>& env,
            const int stdio[3], std::string* error);

  // What it said since the last call (non-blocking); false when its channel ended.
  bool Read(std::vector<Report>* out);

  // The zygote was reaped (or its channel broke): forgotten.
  void Died() { Close(); }

  // Empty when it runs as it did when it said ready: alive, not stopped or traced, one thread,
  // with the same rlimits, nice value, scheduling policy and priority, CPU affinity and I/O
  // priority; otherwise what differs.
  std::string Changed() const;

  // SIGKILLs it (through its pidfd) and closes its channel; the agent's reaping collects it
  // (then Died).
  void Kill();

 private:
  void Close();

  // The pid names the server only until the agent reaps it: every reap of it must call Died().
  pid_t pid_ = 0;
  int pidfd_ = -1;
  int sock_ = -1;
  bool ready_ = false;
  std::string attributes_;  // as of its "ready"
};

}  // namespace ci::agent
