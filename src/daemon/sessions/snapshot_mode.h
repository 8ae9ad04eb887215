// How a session is snapshotted to disk on this host (docs/sessions.md "What is kept"): its files
// and its Python state, always; whole processes would need a CRIU that passes `criu check`, and
// that is said here (doctor, /health) with what the host's CRIU answered.
#pragma once

#include <string>

namespace ci::daemon {

struct SnapshotMode {
  std::string mode;  // "files+python-state"
  std::string criu;  // what `criu check` answered, or that there is none
};

// Probed once (`criu check`, a second at most), then cached.
const SnapshotMode& SessionSnapshotMode();

}  // namespace ci::daemon
