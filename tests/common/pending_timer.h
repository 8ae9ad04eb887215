// A timer that is still pending when a freeze completes, for the freeze tests of every backend
// (issue 34: nothing runs while frozen, timers included). Its sleep outlasts the time from its
// start to the freeze's end whatever the machine's load: a freeze that came too late is undone
// and the next timer sleeps twice as long (0.5, 1, 2, 4 s), instead of a fixed window.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace ci::testing_support {

struct PendingTimer {
  std::string name;  // the file in /workspace it creates when it fires
  std::chrono::milliseconds sleep;
  // Stay frozen this long after the freeze: past the timer's end, had it run.
  std::chrono::milliseconds FrozenLongEnough() const {
    return sleep + std::chrono::milliseconds(500);
  }
};

// `start(command)` runs the shell command in the background (false: it could not); `freeze()`
// and `thaw()` freeze and thaw the sandbox. Returns the timer pending in the frozen sandbox.
template <typename Start, typename Freeze, typename Thaw>
std::optional<PendingTimer> FreezeWithPendingTimer(Start start, Freeze freeze, Thaw thaw) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    const std::chrono::milliseconds sleep(500 << attempt);
    const std::string name = "fired" + std::to_string(attempt);
    const std::string seconds =
        std::to_string(sleep.count() / 1000) + "." + std::to_string(sleep.count() % 1000 / 100);
    const auto t0 = std::chrono::steady_clock::now();
    if (!start("sleep " + seconds + "; touch /workspace/" + name)) return std::nullopt;
    freeze();
    if (std::chrono::steady_clock::now() - t0 < sleep) return PendingTimer{name, sleep};
    thaw();
  }
  return std::nullopt;
}

}  // namespace ci::testing_support
