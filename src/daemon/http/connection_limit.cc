#include "daemon/http/connection_limit.h"

#include <sys/resource.h>

#include <algorithm>

namespace ci::daemon {

uint64_t RaiseOpenFileLimit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  if (rl.rlim_cur < rl.rlim_max) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  return rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : rl.rlim_cur;
}

size_t ConnectionCap(uint32_t configured, uint64_t open_files) {
  if (configured > 0) return configured;
  const uint64_t share =
      open_files > kDescriptorsKeptBack ? (open_files - kDescriptorsKeptBack) / 2 : 0;
  return static_cast<size_t>(std::clamp<uint64_t>(share, 16, kMaxDerivedConnections));
}

}  // namespace ci::daemon
