#include "daemon/bootstrap/dockerd_hardening.h"

#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <rapidjson/document.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "core/json.h"
#include "core/policies.h"
#include "runtime/daemon/seccomp_profile.h"

namespace ci::daemon {
namespace {

Result<std::vector<DroppedCapability>> ParseDropList(std::string_view json) {
  const std::string where = "policies/dockerd-capabilities.json";
  rapidjson::Document doc;
  std::string why;
  if (!ParseJson(json, doc, why) || !doc.IsObject() || !doc.HasMember("drop") ||
      !doc["drop"].IsArray()) {
    return Status::Error(where + ": expected {\"drop\": [{\"name\", \"why\"}]} " + why);
  }
  std::vector<DroppedCapability> out;
  for (const auto& e : doc["drop"].GetArray()) {
    if (!e.IsObject() || !e.HasMember("name") || !e["name"].IsString()) {
      return Status::Error(where + ": every entry needs a \"name\"");
    }
    DroppedCapability c;
    c.name = e["name"].GetString();
    if (e.HasMember("why") && e["why"].IsString()) c.why = e["why"].GetString();
    cap_value_t value;
    if (cap_from_name(c.name.c_str(), &value) != 0) {
      return Status::Error(where + ": unknown capability " + c.name);
    }
    c.number = value;
    out.push_back(std::move(c));
  }
  return out;
}

uint64_t HexField(const std::string& status, const char* key) {
  size_t at = status.find(key);
  if (at == std::string::npos) return 0;
  return std::strtoull(status.c_str() + at + std::char_traits<char>::length(key), nullptr, 16);
}

}  // namespace

Result<DockerdHardening> PrepareDockerdHardening() {
  DockerdHardening h;
  auto profile = EmbeddedPolicy("seccomp-dockerd");
  auto caps = EmbeddedPolicy("dockerd-capabilities");
  if (!profile || !caps) return Status::Error("the dockerd policies are not built in");
  std::vector<std::string> skipped;
  auto bpf = runtime::CompileSeccompProfile(*profile, /*log_denied=*/false, &skipped);
  if (!bpf.ok()) {
    return Status::Error("policies/seccomp-dockerd.json: " + bpf.status().message());
  }
  h.seccomp_bpf = std::move(bpf).value();
  auto dropped = ParseDropList(*caps);
  if (!dropped.ok()) return dropped.status();
  h.dropped = std::move(dropped).value();
  for (const auto& c : h.dropped) {
    if (c.number <= CAP_LAST_CAP) h.drop_mask |= uint64_t{1} << c.number;
  }
  return h;
}

int ApplyDockerdHardening(const DockerdHardening& h, const char** step) {
  *step = "dropping capabilities from the bounding set";
  for (const auto& c : h.dropped) {
    // EINVAL: the running kernel does not know this capability, so nothing can hold it.
    if (::prctl(PR_CAPBSET_DROP, c.number, 0, 0, 0) != 0 && errno != EINVAL) return errno;
  }
  *step = "clearing the ambient capabilities";
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
    return errno;
  }
  *step = "dropping capabilities from the permitted and effective sets";
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0) return errno;
  for (int i = 0; i < 2; ++i) {
    auto keep = static_cast<uint32_t>(~(h.drop_mask >> (32 * i)));
    data[i].permitted &= keep;
    data[i].effective &= keep;
    data[i].inheritable &= keep;
  }
  if (::syscall(SYS_capset, &header, data) != 0) return errno;
  *step = "installing the seccomp filter";
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(h.seccomp_bpf.size() / sizeof(sock_filter));
  prog.filter = reinterpret_cast<sock_filter*>(const_cast<char*>(h.seccomp_bpf.data()));
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) return errno;
  return 0;
}

Result<ProcessSecurity> ReadProcessSecurity(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/status";
  std::ifstream in(path);
  if (!in) return Status::Error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  std::string status = text.str();
  ProcessSecurity s;
  if (size_t at = status.find("\nSeccomp:\t"); at != std::string::npos) {
    s.seccomp_mode = std::atoi(status.c_str() + at + 10);
  }
  s.cap_bounding = HexField(status, "\nCapBnd:\t");
  s.cap_effective = HexField(status, "\nCapEff:\t");
  if (size_t at = status.find("\nNoNewPrivs:\t"); at != std::string::npos) {
    s.no_new_privs = status[at + 13] == '1';
  }
  return s;
}

}  // namespace ci::daemon
