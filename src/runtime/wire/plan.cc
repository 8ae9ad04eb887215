#include "runtime/wire/plan.h"

namespace ci::runtime {

Plan PlanFromSpec(const SandboxSpec& spec, const CgroupLayout& cgroup, std::string seccomp_bpf) {
  Plan p;
  p.rootfs = spec.rootfs;
  p.uid = spec.uid;
  p.gid = spec.gid;
  p.hostname = spec.hostname;
  p.memory_bytes = spec.limits.memory_bytes;
  p.pids = spec.limits.pids;
  p.cpu_percent = spec.limits.cpu_percent;
  p.workspace_bytes = spec.limits.workspace_bytes;
  p.tmp_bytes = spec.limits.tmp_bytes;
  p.open_files = spec.limits.open_files;
  p.queued_signals = spec.limits.queued_signals;
  p.message_queue_bytes = spec.limits.message_queue_bytes;
  p.locked_memory_bytes = spec.limits.locked_memory_bytes;
  p.read_only_root = spec.security.read_only_root;
  p.no_new_privs = spec.security.no_new_privs;
  p.network_none = spec.security.network_none;
  p.seccomp_bpf = std::move(seccomp_bpf);
  p.cgroup = cgroup;
  p.session_expires_at = spec.session_expires_at;
  return p;
}

std::string EncodePlan(const Plan& p) { return json::Encode(p); }

bool DecodePlan(std::string_view text, Plan* p) { return json::Decode(text, p); }

}  // namespace ci::runtime
