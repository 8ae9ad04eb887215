#include "daemon/sessions/snapshot_mode.h"

#include <unistd.h>

#include <cstdio>

namespace ci::daemon {
namespace {

SnapshotMode Probe() {
  SnapshotMode m{"files+python-state", ""};
  const char* criu = nullptr;
  for (const char* path : {"/usr/sbin/criu", "/usr/bin/criu", "/usr/local/sbin/criu"}) {
    if (access(path, X_OK) == 0) criu = path;
  }
  if (criu == nullptr) {
    m.criu = "no criu installed: processes are not checkpointed";
    return m;
  }
  std::string cmd = std::string("timeout 5 ") + criu + " check 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  if (p != nullptr) {
    char buf[512];
    while (out.size() < 4096 && std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  }
  const int status = p != nullptr ? pclose(p) : -1;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  const std::string last =
      out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
  m.criu = status == 0
               ? std::string(criu) +
                     " check passes, but whole-process checkpoints are not built yet: "
                     "processes are not checkpointed"
               : std::string(criu) + " check fails (" + last + "): processes are not checkpointed";
  return m;
}

}  // namespace

const SnapshotMode& SessionSnapshotMode() {
  static const SnapshotMode mode = Probe();
  return mode;
}

}  // namespace ci::daemon
