#include "runtime/daemon/seccomp_profile.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <memory>

#include "runtime/kernel/unique_fd.h"

namespace ci::runtime {
namespace {

using rapidjson::Value;

struct CtxDeleter {
  void operator()(scmp_filter_ctx ctx) const { seccomp_release(ctx); }
};
using Ctx = std::unique_ptr<void, CtxDeleter>;

Status Bad(const std::string& what) { return Status::Error("seccomp profile: " + what); }

std::string Str(const Value& v) { return std::string(v.GetString(), v.GetStringLength()); }

// "SCMP_ARCH_X86_64" -> the libseccomp token; 0 when unknown.
uint32_t ArchToken(const std::string& name) {
  constexpr std::string_view kPrefix = "SCMP_ARCH_";
  if (name.rfind(kPrefix, 0) != 0) return 0;
  std::string lower = name.substr(kPrefix.size());
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return seccomp_arch_resolve_name(lower.c_str());
}

// The names Docker's `includes/excludes.arches` use (Go's GOARCH) for the native architecture.
bool IsNativeGoArch(const std::string& go) {
  const uint32_t native = seccomp_arch_native();
  if (native == SCMP_ARCH_X86_64) return go == "amd64";
  if (native == SCMP_ARCH_AARCH64) return go == "arm64";
  if (native == SCMP_ARCH_X86) return go == "x86" || go == "386";
  return false;
}

bool HasNativeArch(const Value& rule, const char* key) {
  auto it = rule.FindMember(key);
  if (it == rule.MemberEnd() || !it->value.IsObject()) return false;
  auto arches = it->value.FindMember("arches");
  if (arches == it->value.MemberEnd() || !arches->value.IsArray()) return false;
  for (const auto& a : arches->value.GetArray()) {
    if (a.IsString() && IsNativeGoArch(Str(a))) return true;
  }
  return false;
}

bool HasNonEmpty(const Value& rule, const char* key, const char* field) {
  auto it = rule.FindMember(key);
  if (it == rule.MemberEnd() || !it->value.IsObject()) return false;
  auto f = it->value.FindMember(field);
  return f != it->value.MemberEnd() && f->value.IsArray() && !f->value.Empty();
}

// Whether a rule applies to our sandboxes, which hold no capabilities.
bool RuleApplies(const Value& rule) {
  if (HasNonEmpty(rule, "includes", "caps")) return false;
  if (HasNonEmpty(rule, "includes", "arches") && !HasNativeArch(rule, "includes")) return false;
  if (HasNonEmpty(rule, "excludes", "arches") && HasNativeArch(rule, "excludes")) return false;
  return true;
}

Result<uint32_t> Action(const std::string& name, uint32_t errno_ret, bool log_denied) {
  uint32_t action;
  if (name == "SCMP_ACT_ALLOW") return SCMP_ACT_ALLOW;
  if (name == "SCMP_ACT_ERRNO") {
    action = SCMP_ACT_ERRNO(errno_ret);
  } else if (name == "SCMP_ACT_KILL" || name == "SCMP_ACT_KILL_THREAD") {
    action = SCMP_ACT_KILL_THREAD;
  } else if (name == "SCMP_ACT_KILL_PROCESS") {
    action = SCMP_ACT_KILL_PROCESS;
  } else if (name == "SCMP_ACT_TRAP") {
    action = SCMP_ACT_TRAP;
  } else if (name == "SCMP_ACT_LOG") {
    action = SCMP_ACT_LOG;
  } else {
    // SCMP_ACT_TRACE and SCMP_ACT_NOTIFY need a supervisor process the runtime does not have.
    return Bad("unsupported action '" + name +
               "' (expected SCMP_ACT_ALLOW, _ERRNO, _KILL, _KILL_THREAD, _KILL_PROCESS, _TRAP or "
               "_LOG)");
  }
  return log_denied ? SCMP_ACT_LOG : action;
}

Result<uint32_t> ErrnoRet(const Value& o, uint32_t fallback) {
  auto it = o.FindMember("errnoRet");
  if (it == o.MemberEnd() || it->value.IsNull()) return fallback;
  if (!it->value.IsUint() || it->value.GetUint() > 4095) return Bad("errnoRet must be 0..4095");
  return it->value.GetUint();
}

Result<scmp_compare> CompareOp(const std::string& op) {
  static constexpr std::pair<std::string_view, scmp_compare> kOps[] = {
      {"SCMP_CMP_NE", SCMP_CMP_NE},
      {"SCMP_CMP_LT", SCMP_CMP_LT},
      {"SCMP_CMP_LE", SCMP_CMP_LE},
      {"SCMP_CMP_EQ", SCMP_CMP_EQ},
      {"SCMP_CMP_GE", SCMP_CMP_GE},
      {"SCMP_CMP_GT", SCMP_CMP_GT},
      {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ}};
  for (const auto& [name, cmp] : kOps) {
    if (op == name) return cmp;
  }
  return Bad("unknown argument operator '" + op + "'");
}

Result<std::vector<scmp_arg_cmp>> Conditions(const Value& rule) {
  std::vector<scmp_arg_cmp> out;
  auto it = rule.FindMember("args");
  if (it == rule.MemberEnd() || it->value.IsNull()) return out;
  if (!it->value.IsArray()) return Bad("args must be an array");
  for (const auto& a : it->value.GetArray()) {
    auto index = a.FindMember("index");
    auto value = a.FindMember("value");
    auto two = a.FindMember("valueTwo");
    auto op = a.FindMember("op");
    if (!a.IsObject() || index == a.MemberEnd() || !index->value.IsUint() ||
        index->value.GetUint() > 5 || value == a.MemberEnd() || !value->value.IsUint64() ||
        (two != a.MemberEnd() && !two->value.IsUint64()) || op == a.MemberEnd() ||
        !op->value.IsString()) {
      return Bad("an args entry needs index 0..5, value (and valueTwo) as unsigned integers, op");
    }
    auto cmp = CompareOp(Str(op->value));
    if (!cmp.ok()) return cmp.status();
    // For MASKED_EQ the OCI `value` is the mask and `valueTwo` the expected result, which is
    // libseccomp's (datum_a, datum_b) order.
    out.push_back({index->value.GetUint(), *cmp, value->value.GetUint64(),
                   two == a.MemberEnd() ? 0 : two->value.GetUint64()});
  }
  return out;
}

Status AddArchitectures(scmp_filter_ctx ctx, const Value& doc) {
  std::vector<std::string> names;
  if (auto it = doc.FindMember("architectures"); it != doc.MemberEnd() && it->value.IsArray()) {
    for (const auto& a : it->value.GetArray()) {
      if (a.IsString()) names.push_back(Str(a));
    }
  }
  // archMap: Docker adds the entry of the native architecture and its sub-architectures.
  if (auto it = doc.FindMember("archMap"); it != doc.MemberEnd() && it->value.IsArray()) {
    for (const auto& m : it->value.GetArray()) {
      auto arch = m.FindMember("architecture");
      if (arch == m.MemberEnd() || !arch->value.IsString())
        return Bad("archMap entry lacks architecture");
      if (ArchToken(Str(arch->value)) != seccomp_arch_native()) continue;
      auto subs = m.FindMember("subArchitectures");
      if (subs == m.MemberEnd() || !subs->value.IsArray()) continue;
      for (const auto& s : subs->value.GetArray()) {
        if (s.IsString()) names.push_back(Str(s));
      }
    }
  }
  for (const auto& name : names) {
    uint32_t token = ArchToken(name);
    if (token == 0) return Bad("unknown architecture '" + name + "'");
    int rc = seccomp_arch_add(ctx, token);
    if (rc != 0 && rc != -EEXIST) return Status::Errno("seccomp_arch_add " + name, -rc);
  }
  return {};
}

Status AddRule(scmp_filter_ctx ctx, const Value& rule, uint32_t default_action,
               uint32_t default_errno, bool log_denied, std::vector<std::string>* skipped) {
  if (!rule.IsObject()) return Bad("each syscalls entry must be an object");
  if (!RuleApplies(rule)) return {};
  std::vector<std::string> names;
  if (auto it = rule.FindMember("names"); it != rule.MemberEnd() && it->value.IsArray()) {
    for (const auto& n : it->value.GetArray()) {
      if (!n.IsString()) return Bad("syscall names must be strings");
      names.push_back(Str(n));
    }
  }
  if (auto it = rule.FindMember("name"); it != rule.MemberEnd() && it->value.IsString()) {
    names.push_back(Str(it->value));  // the pre-"names" format
  }
  if (names.empty()) return Bad("a syscalls entry has no names");
  auto act = rule.FindMember("action");
  if (act == rule.MemberEnd() || !act->value.IsString()) {
    return Bad("the rule for " + names.front() + " has no action");
  }
  auto errno_ret = ErrnoRet(rule, default_errno);
  if (!errno_ret.ok()) return errno_ret.status();
  auto action = Action(Str(act->value), *errno_ret, log_denied);
  if (!action.ok()) return action.status();
  auto conds = Conditions(rule);
  if (!conds.ok()) return conds.status().Context("the rule for " + names.front());
  // libseccomp refuses a rule whose action is the default one; it would change nothing anyway.
  if (*action == default_action) return {};
  // Two conditions on one argument cannot be ANDed in one libseccomp rule: like runc, add one
  // rule per condition (they are ORed) in that case.
  bool same_arg_twice = false;
  for (size_t i = 0; i < conds->size(); ++i) {
    for (size_t j = i + 1; j < conds->size(); ++j) {
      same_arg_twice |= (*conds)[i].arg == (*conds)[j].arg;
    }
  }
  for (const auto& name : names) {
    int nr = seccomp_syscall_resolve_name(name.c_str());
    if (nr == __NR_SCMP_ERROR) {
      skipped->push_back(name);
      continue;
    }
    auto add = [&](const scmp_arg_cmp* c, unsigned n) {
      int rc = seccomp_rule_add_array(ctx, *action, nr, n, c);
      return rc == 0 ? Status() : Status::Errno("seccomp_rule_add " + name, -rc);
    };
    if (!same_arg_twice) {
      if (Status s = add(conds->data(), static_cast<unsigned>(conds->size())); !s.ok()) return s;
      continue;
    }
    for (const auto& c : *conds) {
      if (Status s = add(&c, 1); !s.ok()) return s;
    }
  }
  return {};
}

Result<std::string> ExportBpf(scmp_filter_ctx ctx) {
  // libseccomp 2.5 exports only to an fd; a memfd keeps it off the filesystem.
  UniqueFd fd(::memfd_create("seccomp-bpf", MFD_CLOEXEC));
  if (fd.get() < 0) return Status::Errno("memfd_create", errno);
  if (int rc = seccomp_export_bpf(ctx, fd.get()); rc != 0) {
    return Status::Errno("seccomp_export_bpf", -rc);
  }
  std::string bpf;
  char buf[8192];
  ::lseek(fd.get(), 0, SEEK_SET);
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Errno("read the exported BPF", errno);
    if (n == 0) break;
    bpf.append(buf, static_cast<size_t>(n));
  }
  if (bpf.empty() || bpf.size() % 8 != 0) return Bad("libseccomp exported a malformed program");
  return bpf;
}

}  // namespace

Result<std::string> CompileSeccompProfile(std::string_view json, bool log_denied,
                                          std::vector<std::string>* skipped_names) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError()) {
    return Bad(std::string("invalid JSON at offset ") + std::to_string(doc.GetErrorOffset()) +
               ": " + rapidjson::GetParseError_En(doc.GetParseError()));
  }
  if (!doc.IsObject()) return Bad("expected a JSON object");
  auto def = doc.FindMember("defaultAction");
  if (def == doc.MemberEnd() || !def->value.IsString()) return Bad("defaultAction is missing");
  uint32_t default_errno = EPERM;
  if (auto it = doc.FindMember("defaultErrnoRet"); it != doc.MemberEnd() && !it->value.IsNull()) {
    if (!it->value.IsUint() || it->value.GetUint() > 4095) {
      return Bad("defaultErrnoRet must be 0..4095");
    }
    default_errno = it->value.GetUint();
  }
  auto default_action = Action(Str(def->value), default_errno, log_denied);
  if (!default_action.ok()) return default_action.status().Context("defaultAction");

  Ctx ctx(seccomp_init(*default_action));
  if (!ctx) return Bad("seccomp_init refused the default action");
  // A binary tree instead of a linear list of ~300 comparisons: every syscall pays for the filter.
  (void)seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2);
  if (Status s = AddArchitectures(ctx.get(), doc); !s.ok()) return s;

  std::vector<std::string> skipped;
  if (auto it = doc.FindMember("syscalls"); it != doc.MemberEnd() && !it->value.IsNull()) {
    if (!it->value.IsArray()) return Bad("syscalls must be an array");
    for (const auto& rule : it->value.GetArray()) {
      Status s = AddRule(ctx.get(), rule, *default_action, default_errno, log_denied, &skipped);
      if (!s.ok()) return s;
    }
  }
  if (skipped_names != nullptr) {
    std::sort(skipped.begin(), skipped.end());
    skipped.erase(std::unique(skipped.begin(), skipped.end()), skipped.end());
    skipped_names->insert(skipped_names->end(), skipped.begin(), skipped.end());
  }
  return ExportBpf(ctx.get());
}

}  // namespace ci::runtime
