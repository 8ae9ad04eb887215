#include "runtime/wire/fd_passing.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ci::runtime {
namespace {

// Keeps the descriptors of an SCM_RIGHTS message in `fds`, or closes them.
void TakeFds(struct msghdr& msg, std::vector<int>* fds) {
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const auto* data = reinterpret_cast<const unsigned char*>(CMSG_DATA(c));
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, data + i * sizeof(int), sizeof fd);
      if (fds != nullptr) {
        fds->push_back(fd);
      } else {
        ::close(fd);
      }
    }
  }
}

}  // namespace

int SendWithFds(int socket, std::string_view data, const std::vector<int>& fds) {
  if (data.empty() || fds.size() > kMaxPassedFds) return EINVAL;
  alignas(struct cmsghdr) char control[CMSG_SPACE(kMaxPassedFds * sizeof(int))] = {};
  size_t off = 0;
  while (off < data.size()) {
    struct iovec iov = {const_cast<char*>(data.data()) + off, data.size() - off};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (off == 0 && !fds.empty()) {  // the descriptors ride on the first byte
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
      struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
      std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
    }
    ssize_t n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EPIPE;
    off += static_cast<size_t>(n);
  }
  return 0;
}

int ReceiveWithFds(int socket, void* data, size_t size, std::vector<int>* fds) {
  auto* p = static_cast<unsigned char*>(data);
  size_t done = 0;
  while (done < size) {
    alignas(struct cmsghdr) char control[CMSG_SPACE(kMaxPassedFds * sizeof(int))];
    struct iovec iov = {p + done, size - done};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == ENOTSOCK) n = ::read(socket, p + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n > 0 && msg.msg_controllen > 0) TakeFds(msg, fds);
    if (n == 0) return done == 0 ? ENODATA : EPIPE;
    done += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace ci::runtime
