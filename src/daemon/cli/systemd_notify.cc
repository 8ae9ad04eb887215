#include "daemon/cli/systemd_notify.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace ci::daemon {

Status SystemdNotifyTo(const char* socket_path, std::string_view state) {
  if (socket_path == nullptr || socket_path[0] == '\0') return Status();
  std::string_view path(socket_path);
  if (path[0] != '/' && path[0] != '@') {
    // systemd also knows vsock: addresses (for VMs); the daemon runs where its manager does.
    return Status::Error(std::string("NOTIFY_SOCKET '") + std::string(path) +
                         "' is neither a path nor an abstract socket name (@...)");
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() > sizeof(addr.sun_path) - 1) {
    return Status::Error("NOTIFY_SOCKET is longer than a unix socket address");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  // An abstract name has no terminating NUL: its length is exactly what the address holds.
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  if (path[0] == '@') {
    addr.sun_path[0] = '\0';
  } else {
    len += 1;
  }
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Errno("notify socket", errno);
  ssize_t n = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                       reinterpret_cast<const sockaddr*>(&addr), len);
  int err = errno;
  ::close(fd);
  if (n < 0)
    return Status::Errno(std::string("sending to NOTIFY_SOCKET ") + std::string(path), err);
  if (static_cast<size_t>(n) != state.size()) {
    return Status::Error(std::string("NOTIFY_SOCKET ") + std::string(path) +
                         " took a partial datagram");
  }
  return Status();
}

void SystemdNotify(std::string_view state) {
  static bool warned = false;
  Status s = SystemdNotifyTo(std::getenv("NOTIFY_SOCKET"), state);
  if (!s.ok() && !warned) {
    warned = true;
    spdlog::warn("systemd notification failed: {}", s.message());
  }
}

void SystemdReady(std::string_view status) {
  SystemdNotify("READY=1\n" + SystemdStatusLine(status));
}

std::string SystemdStatusLine(std::string_view text) {
  std::string line = "STATUS=";
  for (char c : text) line += (c == '\n') ? ' ' : c;
  return line;
}

}  // namespace ci::daemon
