// The shim plan: what the shim needs from a SandboxSpec to build one sandbox, plus the cgroup
// layout the daemon detected. SandboxSpec -> Plan is a pure translator (unit-tested); the plan
// travels as JSON over fd 3.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/json.h"
#include "core/sandbox_spec.h"
#include "runtime/kernel/cgroups.h"
#include "runtime/kernel/sandbox_ids.h"

namespace ci::runtime {

struct Plan {
  std::string rootfs = "host";
  uint32_t uid = 65532;
  uint32_t gid = 65532;
  std::string hostname = "sandbox";
  uint64_t memory_bytes = 0;
  uint32_t pids = 0;
  uint32_t cpu_percent = 0;  // v2 cpu.max cap; 0 = unlimited
  uint64_t workspace_bytes = 0;
  uint64_t tmp_bytes = 0;
  // SandboxLimits' rlimits (kernel_quotas.h), set by init (its `rlimits` stage), not by the shim.
  uint64_t open_files = 0;
  uint64_t queued_signals = 0;
  uint64_t message_queue_bytes = 0;
  uint64_t locked_memory_bytes = 0;
  bool read_only_root = true;
  bool no_new_privs = true;
  bool network_none = true;
  // The compiled seccomp program (struct sock_filter[]), empty = no filter. The daemon compiles
  // the spec's profile once; the shim only installs these bytes.
  std::string seccomp_bpf;
  // Decided by the daemon (its euid != 0, see src/runtime/README.md "Rootless"): one-id maps, init
  // is the sandbox user from the start. Independent of it, cgroup.version 0 means "no cgroup": the
  // memory and pids limits become rlimits.
  bool rootless = false;
  // Host ids (sandbox_ids.h): the shim claims one index of the ranges (a lock in id_lock_dir);
  // the program's host uid and gid are their first + index. As root the range is
  // SANDBOX_ID_RANGE (uids = gids); rootless, the daemon user's subordinate ids. Empty (rootless
  // without subordinate ids): the one-id map, where init shares the program's id.
  IdRange host_uids;
  IdRange host_gids;
  std::string id_lock_dir;
  // Init and the program are different users inside (every mode but the one-id map).
  bool TwoIds() const { return !rootless || !host_uids.empty(); }
  CgroupLayout cgroup;
  // SandboxSpec::session_expires_at: init serves many runs and exits at this unix time.
  int64_t session_expires_at = 0;
};

// The plan's wire format, listed once for encoding and decoding (core/json.h).
template <typename V, json::Message<Plan> M>
void Fields(V& v, M& p) {
  v("rootfs", p.rootfs);
  v("uid", p.uid);
  v("gid", p.gid);
  v("hostname", p.hostname);
  v("memory_bytes", p.memory_bytes);
  v("pids", p.pids);
  v.Optional("cpu_percent", p.cpu_percent);  // 0 (no cap) when absent
  v("workspace_bytes", p.workspace_bytes);
  v("tmp_bytes", p.tmp_bytes);
  v("open_files", p.open_files);
  v("queued_signals", p.queued_signals);
  v("message_queue_bytes", p.message_queue_bytes);
  v("locked_memory_bytes", p.locked_memory_bytes);
  v("read_only_root", p.read_only_root);
  v("no_new_privs", p.no_new_privs);
  v("network_none", p.network_none);
  v("seccomp_bpf", json::Hex(p.seccomp_bpf));  // the BPF is binary
  v("rootless", p.rootless);
  v("host_uid_first", p.host_uids.first);
  v("host_uid_count", p.host_uids.count);
  v("host_gid_first", p.host_gids.first);
  v("host_gid_count", p.host_gids.count);
  v("id_lock_dir", p.id_lock_dir);
  v("cgroup_version", p.cgroup.version);
  v("cgroup_root", p.cgroup.root);
  v("session_expires_at", p.session_expires_at);
}

// `seccomp_bpf` is the spec's seccomp profile compiled by CompileSeccompProfile (empty when the
// spec has none): a parameter, so no caller can forget the filter.
Plan PlanFromSpec(const SandboxSpec& spec, const CgroupLayout& cgroup, std::string seccomp_bpf);
std::string EncodePlan(const Plan& plan);
// False when the JSON is malformed or a required field is missing.
bool DecodePlan(std::string_view text, Plan* plan);

}  // namespace ci::runtime
