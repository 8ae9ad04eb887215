#include "daemon/http/socket_activation.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>

namespace ci::daemon {
namespace {

bool ParseNumber(const char* text, long& out) {
  std::string_view s(text);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

Status CheckListeningTcp(int fd) {
  int type = 0, listening = 0;
  socklen_t len = sizeof(type);
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) {
    return Status::Errno(std::string("fd ") + std::to_string(fd) + " is not a socket", errno);
  }
  len = sizeof(listening);
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0) {
    return Status::Errno(std::string("fd ") + std::to_string(fd), errno);
  }
  sockaddr_storage addr{};
  len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Status::Errno(std::string("fd ") + std::to_string(fd), errno);
  }
  if (type != SOCK_STREAM || !listening ||
      (addr.ss_family != AF_INET && addr.ss_family != AF_INET6)) {
    return Status::Error(std::string("fd ") + std::to_string(fd) +
                         " is not a listening TCP socket (the .socket unit needs "
                         "ListenStream=<port> and Accept=no)");
  }
  return Status();
}

}  // namespace

Result<int> ListenFdFromEnv(const EnvLookup& env, pid_t self, int first_fd) {
  const char* pid_text = env("LISTEN_PID");
  const char* fds_text = env("LISTEN_FDS");
  long pid = 0, count = 0;
  if (pid_text == nullptr || !ParseNumber(pid_text, pid) || pid != self) return -1;
  if (fds_text == nullptr || !ParseNumber(fds_text, count)) {
    return Status::Error("socket activation: LISTEN_FDS is missing or not a number");
  }
  if (count == 0) return -1;
  if (count != 1) {
    // One HTTP port is all the daemon serves; several would be a unit file mistake.
    return Status::Error(std::string("socket activation: ") + std::to_string(count) +
                         " sockets passed (LISTEN_FDS), the daemon takes exactly one");
  }
  if (Status s = CheckListeningTcp(first_fd); !s.ok()) return s.Context("socket activation");
  if (::fcntl(first_fd, F_SETFD, FD_CLOEXEC) != 0) {
    return Status::Errno("socket activation: fcntl", errno);
  }
  return first_fd;
}

Result<int> TakeSystemdListenFd() {
  Result<int> fd = ListenFdFromEnv([](const char* name) { return std::getenv(name); }, ::getpid());
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
  return fd;
}

}  // namespace ci::daemon
