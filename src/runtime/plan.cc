#include "runtime/plan.h"

#include "core/json.h"
#include "core/random.h"

namespace ci::runtime {
namespace {

bool Unhex(std::string_view hex, std::string* out) {
  auto nibble = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  if (hex.size() % 2 != 0) return false;
  out->clear();
  out->reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi << 4 | lo));
  }
  return true;
}

}  // namespace

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

std::string EncodePlan(const Plan& p) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartObject();
  json::Str(w, "rootfs", p.rootfs);
  json::U64(w, "uid", p.uid);
  json::U64(w, "gid", p.gid);
  json::Str(w, "hostname", p.hostname);
  json::U64(w, "memory_bytes", p.memory_bytes);
  json::U64(w, "pids", p.pids);
  json::U64(w, "cpu_percent", p.cpu_percent);
  json::U64(w, "workspace_bytes", p.workspace_bytes);
  json::U64(w, "tmp_bytes", p.tmp_bytes);
  json::U64(w, "open_files", p.open_files);
  json::U64(w, "queued_signals", p.queued_signals);
  json::U64(w, "message_queue_bytes", p.message_queue_bytes);
  json::U64(w, "locked_memory_bytes", p.locked_memory_bytes);
  json::Bool(w, "read_only_root", p.read_only_root);
  json::Bool(w, "no_new_privs", p.no_new_privs);
  json::Bool(w, "network_none", p.network_none);
  json::Str(w, "seccomp_bpf", HexEncode(p.seccomp_bpf));  // the BPF is binary
  json::Bool(w, "rootless", p.rootless);
  json::U64(w, "host_uid_first", p.host_uids.first);
  json::U64(w, "host_uid_count", p.host_uids.count);
  json::U64(w, "host_gid_first", p.host_gids.first);
  json::U64(w, "host_gid_count", p.host_gids.count);
  json::Str(w, "id_lock_dir", p.id_lock_dir);
  json::U64(w, "cgroup_version", static_cast<uint64_t>(p.cgroup.version));
  json::Str(w, "cgroup_root", p.cgroup.root);
  json::I64(w, "session_expires_at", p.session_expires_at);
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

bool DecodePlan(std::string_view text, Plan* p) {
  rapidjson::Document d;
  if (!json::Parse(text, &d)) return false;
  uint32_t version = 0;
  std::string bpf_hex;
  bool ok =
      json::Get(d, "rootfs", &p->rootfs) && json::Get(d, "uid", &p->uid) &&
      json::Get(d, "gid", &p->gid) && json::Get(d, "hostname", &p->hostname) &&
      json::Get(d, "memory_bytes", &p->memory_bytes) && json::Get(d, "pids", &p->pids) &&
      json::Get(d, "workspace_bytes", &p->workspace_bytes) &&
      json::Get(d, "tmp_bytes", &p->tmp_bytes) && json::Get(d, "open_files", &p->open_files) &&
      json::Get(d, "queued_signals", &p->queued_signals) &&
      json::Get(d, "message_queue_bytes", &p->message_queue_bytes) &&
      json::Get(d, "locked_memory_bytes", &p->locked_memory_bytes) &&
      json::Get(d, "read_only_root", &p->read_only_root) &&
      json::Get(d, "no_new_privs", &p->no_new_privs) &&
      json::Get(d, "network_none", &p->network_none) && json::Get(d, "seccomp_bpf", &bpf_hex) &&
      Unhex(bpf_hex, &p->seccomp_bpf) && json::Get(d, "rootless", &p->rootless) &&
      json::Get(d, "host_uid_first", &p->host_uids.first) &&
      json::Get(d, "host_uid_count", &p->host_uids.count) &&
      json::Get(d, "host_gid_first", &p->host_gids.first) &&
      json::Get(d, "host_gid_count", &p->host_gids.count) &&
      json::Get(d, "id_lock_dir", &p->id_lock_dir) && json::Get(d, "cgroup_version", &version) &&
      json::Get(d, "cgroup_root", &p->cgroup.root) &&
      json::Get(d, "session_expires_at", &p->session_expires_at);
  // Optional in the wire format: 0 (no cap) when absent.
  if (ok && !json::Get(d, "cpu_percent", &p->cpu_percent)) p->cpu_percent = 0;
  p->cgroup.version = static_cast<int>(version);
  return ok;
}

}  // namespace ci::runtime
