// Descriptors passed along with bytes on a unix socket (SCM_RIGHTS): init's frames, a session
// call's stdio, the fork server's requests and answers. Blocking, exception-free (shim side).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace ci::runtime {

// At most this many descriptors travel with one message.
constexpr size_t kMaxPassedFds = 8;

// Sends all of `data` (at least one byte), `fds` attached to its first byte. Retries EINTR and
// partial sends; 0 or an errno.
int SendWithFds(int socket, std::string_view data, const std::vector<int>& fds);

// Receives exactly `size` bytes; the descriptors that come with them (close-on-exec) go into
// `fds`, or are closed when it is null. A pipe is read as well (no descriptors). 0, ENODATA on
// EOF before the first byte, EPIPE on EOF within, or an errno.
int ReceiveWithFds(int socket, void* data, size_t size, std::vector<int>* fds);

}  // namespace ci::runtime
