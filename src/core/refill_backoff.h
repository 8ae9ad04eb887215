// How long a pool that cannot fill waits before its next try (the daemon's warm pools, the
// Kubernetes shared pool's keeper).
#pragma once

#include <algorithm>
#include <chrono>

namespace ci {

// After `failures` failed tries in a row (at least one): 1 s, doubled each time, at most 5 min,
// so a backend that cannot start sandboxes (a missing image, refused permissions) is not asked
// once a second for ever.
inline std::chrono::seconds RefillBackoff(int failures) {
  constexpr std::chrono::seconds kMax(300);
  if (failures >= 10) return kMax;  // 2^9 s is past it already
  return std::min(kMax, std::chrono::seconds(1 << std::max(0, failures - 1)));
}

}  // namespace ci
