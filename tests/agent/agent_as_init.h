// The real agent binary (CI_AGENT_BINARY) as PID 1 of fresh pid, mount and IPC namespaces, its
// stdin and stdout pipes to the test, the way the daemon drives it over a container's attach
// stream. Root only.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace ci::agent {

struct AgentProcess {
  pid_t pid = -1;       // the namespace's parent (its exit is the agent's)
  int to_agent = -1;    // the agent's stdin
  int from_agent = -1;  // the agent's stdout
};

// `uid`: the agent runs as that user (and group), as in a container; 0: root. pid -1 when the
// pipes or the fork failed.
inline AgentProcess StartAgentAsInit(const std::vector<std::string>& args, uid_t uid = 0) {
  AgentProcess out;
  int in[2], from[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return out;
  if (::pipe2(from, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    return out;
  }
  out.pid = ::fork();
  if (out.pid == 0) {
    // Only the test holds the daemon's ends: the agent must see the end of its stream.
    ::close(in[1]);
    ::close(from[0]);
    if (::unshare(CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC) != 0) ::_exit(100);
    pid_t init = ::fork();
    if (init == 0) {
      if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
          ::mount("proc", "/proc", "proc", 0, nullptr) != 0 || ::dup2(in[0], 0) != 0 ||
          ::dup2(from[1], 1) != 1) {
        ::_exit(101);
      }
      if (uid != 0 && (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0)) {
        ::_exit(103);
      }
      std::vector<char*> argv = {const_cast<char*>(CI_AGENT_BINARY)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(CI_AGENT_BINARY, argv.data());
      ::_exit(102);
    }
    int status = 0;
    ::waitpid(init, &status, 0);
    ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  ::close(in[0]);
  ::close(from[1]);
  out.to_agent = in[1];
  out.from_agent = from[0];
  if (out.pid < 0) {
    ::close(out.to_agent);
    ::close(out.from_agent);
    out = AgentProcess{};
  }
  return out;
}

}  // namespace ci::agent
