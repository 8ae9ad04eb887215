#include "runtime/init/egress_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <string>

#include "runtime/kernel/unique_fd.h"
#include "runtime/wire/fd_passing.h"
#include "runtime/wire/messages.h"
#include "runtime/wire/protocol.h"

namespace ci::runtime {

bool ServeEgressListen(int service_fd, std::string_view payload) {
  auto refuse = [&](const std::string& why) {
    return proto::WriteFrame(service_fd, proto::Msg::kError, proto::EncodeError(why)) == 0;
  };
  unsigned port = 0;
  auto [end, ec] = std::from_chars(payload.data(), payload.data() + payload.size(), port);
  if (ec != std::errc() || end != payload.data() + payload.size() || port == 0 || port > 65535) {
    return refuse("egress: bad port");
  }
  // Close-on-exec: no program of the sandbox inherits it.
  UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return refuse(std::string("egress socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(s.get(), 128) != 0) {
    return refuse("egress: listening on 127.0.0.1:" + std::to_string(port) + ": " +
                  std::strerror(errno));
  }
  unsigned char header[proto::kHeaderSize];
  proto::EncodeHeader(proto::Msg::kEgressSocket, 0, header);
  return SendWithFds(service_fd,
                     std::string_view(reinterpret_cast<const char*>(header), sizeof header),
                     {s.get()}) == 0;
}

}  // namespace ci::runtime
