#include "core/sandbox_spec.h"

namespace ci {

Status Validate(const SandboxSpec& spec) {
  if (spec.rootfs.empty()) return Status::Error("rootfs must be 'host' or a directory");
  if (spec.rootfs != "host" && spec.rootfs.front() != '/') {
    return Status::Error("rootfs directory must be an absolute path: " + spec.rootfs);
  }
  if (spec.uid == 0 || spec.gid == 0) return Status::Error("the sandbox user must not be root");
  if (spec.cwd.empty() || spec.cwd.front() != '/') return Status::Error("cwd must be absolute");
  if (spec.limits.memory_bytes < (16ull << 20)) return Status::Error("memory limit below 16 MiB");
  if (spec.limits.pids < 4) return Status::Error("pids limit below 4");
  if (spec.limits.cpu_time_sec == 0) return Status::Error("cpu time limit must be positive");
  if (spec.limits.workspace_bytes == 0 || spec.limits.tmp_bytes == 0) {
    return Status::Error("tmpfs sizes must be positive");
  }
  if (spec.limits.open_files < 64) return Status::Error("open files limit below 64");
  if (spec.limits.queued_signals == 0)
    return Status::Error("queued signals limit must be positive");
  if (!spec.prestart_argv.empty() && spec.session_expires_at != 0) {
    return Status::Error("a session sandbox pre-starts no program");
  }
  for (const auto& kv : spec.env) {
    if (kv.find('=') == std::string::npos) return Status::Error("env entry without '=': " + kv);
  }
  return {};
}

std::vector<std::string> DefaultSandboxEnv() {
  return {"PYTHONUNBUFFERED=1",
          "PYTHONDONTWRITEBYTECODE=1",
          "PYTHONIOENCODING=utf-8",
          "MPLCONFIGDIR=/tmp/matplotlib",
          "HOME=/tmp",
          "PATH=/usr/local/bin:/usr/bin:/bin",
          "LANG=C.UTF-8"};
}

}  // namespace ci
