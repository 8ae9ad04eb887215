#include "agent/python_fork_server.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/child.h"
#include "agent/process_attributes.h"
#include "core/signal_state.h"

namespace ci::agent {
namespace {

void AppendNul(std::string& out, const std::string& s) {
  out.append(s);
  out.push_back('\0');
}

}  // namespace

bool Zygote::Start(const ExecRequest& req, const std::vector<std::string>& env,
                   std::string* error) {
  Close();
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    *error = std::string("socketpair: ") + std::strerror(errno);
    return false;
  }
  ExecVectors v = VectorsOf(req.argv, env);
  pid_t pid = ::fork();
  if (pid == 0) {
    ResetSignalState();  // not the agent's (SIGPIPE ignored, SIGCHLD blocked)
    ::setsid();          // its session is what the agent's kills spare
    int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(null, 1) < 0 || ::dup2(null, 2) < 0 ||
        ::dup2(pair[1], 3) != 3 || ::chdir(req.cwd.empty() ? "/" : req.cwd.c_str()) != 0) {
      ::_exit(126);
    }
    ::execvpe(v.argv[0], v.argv.data(), v.envp.data());
    ::_exit(127);
  }
  ::close(pair[1]);
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    ::close(pair[0]);
    return false;
  }
  pid_ = pid;
  // Before the agent can reap it, so it names this process for as long as it is held.
  pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  sock_ = pair[0];
  ready_ = false;
  if (pidfd_ < 0) {
    *error = std::string("pidfd_open: ") + std::strerror(errno);
    Kill();
    return false;
  }
  return true;
}

bool Zygote::Fork(uint32_t id, const ExecRequest& req, const std::vector<std::string>& env,
                  const int stdio[3], std::string* error) {
  if (sock_ < 0) {
    *error = "no fork server";
    return false;
  }
  std::string msg;
  AppendNul(msg, std::to_string(id));
  AppendNul(msg, req.cwd.empty() ? "/" : req.cwd);
  for (const auto& a : req.argv) AppendNul(msg, a);
  msg.push_back('\0');  // the end of argv
  for (const auto& kv : env) AppendNul(msg, kv);
  iovec iov{msg.data(), msg.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(3 * sizeof(int));
  std::memcpy(CMSG_DATA(c), stdio, 3 * sizeof(int));
  for (;;) {
    if (::sendmsg(sock_, &m, MSG_NOSIGNAL) == static_cast<ssize_t>(msg.size())) return true;
    if (errno != EINTR) break;
  }
  *error = std::string("to the fork server: ") + std::strerror(errno);
  return false;
}

bool Zygote::Read(std::vector<Report>* out) {
  while (sock_ >= 0) {
    char buf[4096];
    ssize_t n = ::recv(sock_, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) return false;
    std::vector<std::string> parts;
    std::string_view rest(buf, static_cast<size_t>(n));
    for (size_t nul; (nul = rest.find('\0')) != std::string_view::npos;) {
      parts.emplace_back(rest.substr(0, nul));
      rest.remove_prefix(nul + 1);
    }
    parts.emplace_back(rest);
    Report r;
    if (parts[0] == "ready") {
      ready_ = true;
      attributes_ = ProcessAttributes(pid_);
      out->push_back(r);
      continue;
    }
    if (parts.size() != 3 || (parts[0] != "pid" && parts[0] != "err")) return false;
    r.kind = parts[0] == "pid" ? Report::kPid : Report::kError;
    r.id = static_cast<uint32_t>(std::strtoul(parts[1].c_str(), nullptr, 10));
    if (r.kind == Report::kPid) {
      r.pid = static_cast<pid_t>(std::strtol(parts[2].c_str(), nullptr, 10));
      if (r.pid <= 1) return false;
    } else {
      r.why = parts[2];
    }
    out->push_back(r);
  }
  return false;
}

std::string Zygote::Changed() const {
  if (pid_ <= 0 || sock_ < 0) return "it is gone";
  if (!ready_) return "it never said it was ready";
  std::vector<std::string> stat = StatFields(pid_);
  if (stat.empty() || stat[0] == "T" || stat[0] == "t" || stat[0] == "Z") {
    return "its state is " + (stat.empty() ? std::string("unknown") : stat[0]);
  }
  const std::string change = AttributeChange(attributes_, ProcessAttributes(pid_));
  return change.empty() ? "" : "it changed: " + change;
}

void Zygote::Kill() {
  if (pidfd_ >= 0) {
    ::syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0);
  } else if (pid_ > 0) {
    ::kill(pid_, SIGKILL);  // not reaped yet (Start failed just after the fork)
  }
  if (sock_ >= 0) ::close(sock_);
  sock_ = -1;
}

void Zygote::Close() {
  if (sock_ >= 0) ::close(sock_);
  if (pidfd_ >= 0) ::close(pidfd_);
  sock_ = -1;
  pidfd_ = -1;
  pid_ = 0;
  ready_ = false;
}

}  // namespace ci::agent
